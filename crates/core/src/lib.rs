//! The algorithms behind `agent_memory`, with no PostgreSQL in sight.
//!
//! The extension crate only moves data between PostgreSQL and these functions, so everything
//! here is unit-tested with a plain `cargo test`:
//!
//! * [`decay`]: time decay of a memory's score (none, linear, exponential, power law), the
//!   importance factor and the reference score `similarity × decay × importance factor`;
//! * [`topk`]: bounded top-k selection with a deterministic order;
//! * [`rank`]: recall's vector ranking, where time decides only between memories that compete;
//! * [`text`] and [`keyword`]: tokenising English and Chinese, BM25 and reciprocal rank fusion;
//! * [`fusion`]: hybrid recall's convex fusion of its channels, and the share a hit gives its neighbours;
//! * [`vecmath`]: dot products, norms and validation of embeddings;
//! * [`pack`]: embeddings quantised to 8 bits, many to a page, with provable similarity bounds;
//! * [`policy`]: importance when none is given, and retention;
//! * [`reconcile`]: the ADD / UPDATE / DELETE / NONE decision for a candidate fact;
//! * [`polarity`]: negation in English and Chinese, and comparing statements by their words;
//! * [`forget`]: the retention score and the choice of what to evict;
//! * [`hits`]: recall's hits gathered in a fixed table until the worker folds them;
//! * [`context`]: token counts (cl100k_base, o200k_base, an estimate) and packing a prompt's
//!   channels into a token budget;
//! * [`consolidate`]: near-duplicate clustering, the extractive summariser, summary embeddings;
//! * [`scratch`]: a call's large arrays, kept by the backend for the next call;
//! * [`window`]: time in recall: `since`, `until` and `as_of`.
//! * [`tables`]: a statement's per-user tables renamed, for a pass over another set of them.

pub mod consolidate;
pub mod context;
pub mod decay;
pub mod forget;
pub mod fusion;
pub mod hits;
pub mod keyword;
pub mod pack;
pub mod polarity;
pub mod policy;
pub mod rank;
pub mod reconcile;
pub mod scratch;
pub mod tables;
pub mod text;
pub mod topk;
pub mod vecmath;
pub mod window;
