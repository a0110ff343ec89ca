//! The memory-quality harness: does recall find what a question needs, on real conversations?
//!
//! Loads the conversations of `shared/eval/conversations` (`AGENT_MEMORY_EVAL` names the folder)
//! as the README there describes: each conversation is one user, every turn an episodic memory
//! with `created_at` and `last_hit_at` at its time, shifted so that "now" is one day after the
//! conversation's last turn; asks every question with `touch => false`; and prints evidence
//! recall@5 and @10, overall and per category, for exact cosine (ranked by this client: the
//! baseline any pgvector table gives) and for each recall mode of the product.
//!
//! Then the maintenance that the workers would run, with default settings, in two scenarios:
//! * `passes`: the turns as loaded (retention counted from the load), then `memory_forget()` and
//!   `memory_consolidate()`;
//! * `time`: each turn's `expires_at` as the product's retention rule (`memory_retention`) set
//!   it when the turn was said, so a conversation held over months has aged by now; then the
//!   same passes.
//!
//! After each, the same questions again, and the share of the evidence recall can no longer
//! return.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write;

use agent_memory_bench::table;
use agent_memory_tests::connect;
use pgvector::Vector;
use postgres::Client;

const DIMS: usize = 384;
const DB: &str = "am_bench_quality";
/// The database of the LongMemEval histories.
const LME_DB: &str = "am_bench_lme";
const MODEL: &str = "all-MiniLM-L6-v2";

struct Question {
    user: String,
    text: String,
    emb: Vec<f32>,
    evidence: Vec<String>,
    category: i64,
}

struct Conversation {
    turns: Vec<(String, String, String)>, // (id, text, at)
    embs: Vec<Vec<f32>>,
}

fn read_f32(path: &std::path::Path) -> Vec<Vec<f32>> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    bytes.chunks_exact(4 * DIMS).map(|row| row.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()).collect()
}

fn load_data(dir: &std::path::Path) -> (Vec<Conversation>, Vec<Question>) {
    let mut convs = Vec::new();
    let mut questions = Vec::new();
    for n in 1.. {
        let json = dir.join(format!("conversation-{n}.json"));
        if !json.exists() {
            break;
        }
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let turns: Vec<(String, String, String)> = v["turns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                (t["id"].as_str().unwrap().to_string(), t["text"].as_str().unwrap().to_string(), t["at"].as_str().unwrap().to_string())
            })
            .collect();
        let embs = read_f32(&dir.join(format!("conversation-{n}.turns.f32")));
        assert_eq!(embs.len(), turns.len(), "conversation {n}: one embedding per turn");
        let qembs = read_f32(&dir.join(format!("conversation-{n}.questions.f32")));
        for (q, e) in v["questions"].as_array().unwrap().iter().zip(qembs) {
            questions.push(Question {
                user: format!("conversation-{n}"),
                text: q["question"].as_str().unwrap().to_string(),
                emb: e,
                evidence: q["evidence"].as_array().unwrap().iter().filter_map(|x| x.as_str().map(str::to_string)).collect(),
                category: q["category"].as_i64().unwrap_or(0),
            });
        }
        convs.push(Conversation { turns, embs });
    }
    (convs, questions)
}

/// Loads every conversation as one user, turns of all users interleaved in time order. With
/// `aged`, each turn's `expires_at` is what the retention rule gave it when it was said. With
/// `text`, the turns' embeddings are not the shipped ones: the server embeds every turn's text
/// (`memory_embed(content[])`, the default text model) as it inserts it.
fn load(c: &mut Client, convs: &[Conversation], aged: bool, text: bool) -> HashMap<(String, String), i64> {
    c.batch_execute(
        "SET client_min_messages = warning;
         DROP EXTENSION IF EXISTS agent_memory CASCADE; CREATE EXTENSION agent_memory CASCADE;
         DROP TABLE IF EXISTS eval_turns; CREATE TABLE eval_turns (conv int, ord int, turn_id text, content text, at timestamp, emb vector(384));",
    )
    .unwrap();
    let mut w = c.copy_in("COPY eval_turns FROM STDIN").unwrap();
    for (n, conv) in convs.iter().enumerate() {
        for (i, ((id, text, at), emb)) in conv.turns.iter().zip(&conv.embs).enumerate() {
            let clean = text.replace(['\t', '\n', '\r'], " ").replace('\\', "\\\\");
            let v: Vec<String> = emb.iter().map(|x| x.to_string()).collect();
            writeln!(w, "{}\t{i}\t{id}\t{clean}\t{at}\t[{}]", n + 1, v.join(",")).unwrap();
        }
    }
    w.finish().unwrap();
    let expiry =
        if aged { "x.t + agent_memory.memory_retention('episodic', agent_memory.memory_importance(x.content), false)" } else { "NULL" };
    let (emb, embedded) = if text {
        (
            "v.embedding",
            "JOIN agent_memory.memory_embed((SELECT array_agg(e.content ORDER BY e.conv, e.ord) FROM eval_turns e)) v \
               ON v.ordinal = x.n",
        )
    } else {
        ("x.emb", "")
    };
    c.batch_execute(&format!(
        "INSERT INTO agent_memory.memories (user_id, kind, content, emb, embedding_model, created_at, last_hit_at, source, expires_at)
         SELECT 'conversation-' || x.conv, 'episodic', x.content, {emb}, '{MODEL}', x.t, x.t, x.turn_id, {expiry}
           FROM (SELECT e.*, now() - (max(e.at) OVER (PARTITION BY e.conv) + interval '1 day' - e.at) AS t,
                        row_number() OVER (ORDER BY e.conv, e.ord) AS n FROM eval_turns e) x {embedded}
          ORDER BY x.t, x.conv, x.ord"
    ))
    .unwrap();
    // The packed embeddings the background worker builds for every user of this size: recall is
    // measured through them (its results are the same without them).
    c.batch_execute("SELECT agent_memory.memory_pack(u) FROM (SELECT DISTINCT user_id AS u FROM agent_memory.memories) s").unwrap();
    // As autovacuum leaves the table: hybrid and keyword recall count words from the packs too.
    c.batch_execute("VACUUM ANALYZE agent_memory.memories").unwrap();
    c.query("SELECT user_id, source, id FROM agent_memory.memories", &[])
        .unwrap()
        .iter()
        .map(|r| ((r.get::<_, String>(0), r.get::<_, String>(1)), r.get::<_, i64>(2)))
        .collect()
}

/// A way of ranking: the product's recall in one mode, or the client's exact cosine.
struct Mode {
    name: &'static str,
    sql: Option<&'static str>,
}

const MODES: &[Mode] = &[
    Mode { name: "exact cosine (client; a bare pgvector table)", sql: None },
    Mode { name: "`memory_recall` defaults (vector only)", sql: Some("SELECT id FROM agent_memory.memory_recall($1, $2::vector, 10, model => $4, touch => false)") },
    Mode { name: "`memory_recall(..., decay => 'none')`", sql: Some("SELECT id FROM agent_memory.memory_recall($1, $2::vector, 10, model => $4, touch => false, decay => 'none')") },
    Mode { name: "`memory_recall(..., query_text => q)` hybrid defaults", sql: Some("SELECT id FROM agent_memory.memory_recall($1, $2::vector, 10, model => $4, touch => false, query_text => $3)") },
    Mode { name: "`memory_recall(NULL query, query_text => q)` keyword only", sql: Some("SELECT id FROM agent_memory.memory_recall($1, CASE WHEN false THEN $2::vector END, 10, model => $4, touch => false, query_text => $3)") },
];

/// Text only: the question as text, embedded by the server, on turns the server embedded.
const TEXT_MODE: Mode = Mode {
    name: "`memory_recall(user, 'question', 10)` text only (server-embedded)",
    sql: Some("SELECT id FROM agent_memory.memory_recall($1, $3::text, 10, touch => false)"),
};

/// Per mode: per category (0 = all) the sums of recall@5 and @10 and the count.
type Scores = Vec<BTreeMap<i64, (f64, f64, usize)>>;

/// One mode's mean recall@10 over all questions.
fn overall_recall10(mode: &BTreeMap<i64, (f64, f64, usize)>) -> f64 {
    mode.get(&0).map(|(_, r10, n)| r10 / *n as f64).unwrap_or(0.0)
}

fn ask(c: &mut Client, convs: &[Conversation], questions: &[Question], ids: &HashMap<(String, String), i64>, modes: &[&Mode]) -> Scores {
    let by_id: HashMap<i64, String> = ids.iter().map(|((_, t), id)| (*id, t.clone())).collect();
    let mut scores: Scores = vec![BTreeMap::new(); modes.len()];
    let mut failed = HashSet::new();
    for q in questions {
        let conv: usize = q.user.trim_start_matches("conversation-").parse::<usize>().unwrap() - 1;
        let evidence: HashSet<&str> = q.evidence.iter().map(String::as_str).collect();
        for (mi, mode) in modes.iter().enumerate() {
            let ranked: Vec<String> = match mode.sql {
                None => {
                    let mut sims: Vec<(f32, usize)> = convs[conv]
                        .embs
                        .iter()
                        .enumerate()
                        .map(|(i, e)| (e.iter().zip(&q.emb).map(|(a, b)| a * b).sum::<f32>(), i))
                        .collect();
                    sims.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap().then(a.1.cmp(&b.1)));
                    sims.iter().take(10).map(|(_, i)| convs[conv].turns[*i].0.clone()).collect()
                }
                Some(sql) => match run_mode(c, sql, q) {
                    Ok(rows) => rows.iter().map(|r| by_id.get(&r.get::<_, i64>(0)).cloned().unwrap_or_default()).collect(),
                    Err(e) => {
                        if failed.insert(mi) {
                            eprintln!(
                                "{}: {}",
                                mode.name,
                                e.as_db_error().map(|d| d.message().to_string()).unwrap_or_else(|| e.to_string())
                            );
                        }
                        continue;
                    }
                },
            };
            let hits = |k: usize| -> f64 {
                if q.evidence.is_empty() {
                    return 0.0;
                }
                ranked.iter().take(k).filter(|t| evidence.contains(t.as_str())).count() as f64 / q.evidence.len() as f64
            };
            let (r5, r10) = (hits(5), hits(10));
            for cat in [0, q.category] {
                let e = scores[mi].entry(cat).or_insert((0.0, 0.0, 0));
                e.0 += r5;
                e.1 += r10;
                e.2 += 1;
            }
        }
    }
    scores
}

fn score_rows(modes: &[&Mode], scores: &Scores) -> Vec<Vec<String>> {
    modes
        .iter()
        .zip(scores)
        .map(|(m, s)| {
            let mut row = vec![m.name.to_string()];
            for cat in [0, 1, 2, 3, 4] {
                match s.get(&cat) {
                    Some((r5, r10, n)) if cat == 0 => {
                        row.push(format!("{:.3}", r5 / *n as f64));
                        row.push(format!("{:.3}", r10 / *n as f64));
                    }
                    Some((_, r10, n)) => row.push(format!("{:.3}", r10 / *n as f64)),
                    None => row.push("–".into()),
                }
            }
            row
        })
        .collect()
}

const HEADER: &[&str] = &["ranking", "recall@5", "recall@10", "@10 multi-hop", "@10 temporal", "@10 open-domain", "@10 single-hop"];

/// Evidence turns recall can no longer return: retired (or deleted) rows.
fn evidence_gone(c: &mut Client, questions: &[Question], ids: &HashMap<(String, String), i64>) -> (usize, usize) {
    let wanted: HashSet<i64> =
        questions.iter().flat_map(|q| q.evidence.iter().filter_map(|t| ids.get(&(q.user.clone(), t.clone())).copied())).collect();
    let list: Vec<i64> = wanted.iter().copied().collect();
    let live: i64 = c.query_one("SELECT count(*) FROM agent_memory.memories WHERE id = ANY ($1) AND active", &[&list]).unwrap().get(0);
    (list.len() - live as usize, list.len())
}

/// The conversations' turns as the working memory of their sessions (`agent_memory.turns`).
fn load_turns(c: &mut Client) {
    c.batch_execute(
        "DELETE FROM agent_memory.turns;
         INSERT INTO agent_memory.turns (user_id, session_id, role, content, created_at, metadata)
         SELECT 'conversation-' || x.conv, split_part(x.turn_id, ':', 1), 'user', x.content, x.t, jsonb_build_object('eval_id', x.turn_id)
           FROM (SELECT e.*, now() - (max(e.at) OVER (PARTITION BY e.conv) + interval '1 day' - e.at) AS t FROM eval_turns e) x",
    )
    .unwrap();
}

/// memory_context with a 1,000-token budget for each question, in the conversation's last
/// session: the share of each question's evidence inside the context (by the turn a working row
/// is, or the turn a long-term memory was loaded from).
fn context_share(c: &mut Client, questions: &[Question]) -> f64 {
    load_turns(c);
    let mut total = 0.0;
    for q in questions {
        let session: String = c
            .query_one("SELECT session_id FROM agent_memory.turns WHERE user_id = $1 ORDER BY created_at DESC, id DESC LIMIT 1", &[&q.user])
            .unwrap()
            .get(0);
        let rows = c
            .query(
                "SELECT coalesce(t.metadata->>'eval_id', m.source) FROM agent_memory.memory_context($1, $2, $3::vector, $4, 1000, model => $5, touch => false) x \
                   LEFT JOIN agent_memory.turns t ON t.id = x.turn_id LEFT JOIN agent_memory.memories m ON m.id = x.memory_id",
                &[&q.user, &session, &Vector::from(q.emb.clone()), &q.text, &MODEL],
            )
            .unwrap();
        let got: HashSet<String> = rows.iter().filter_map(|r| r.get::<_, Option<String>>(0)).collect();
        if !q.evidence.is_empty() {
            total += q.evidence.iter().filter(|e| got.contains(*e)).count() as f64 / q.evidence.len() as f64;
        }
    }
    total / questions.len() as f64
}

fn passes(c: &mut Client) -> String {
    let mut out = Vec::new();
    for f in ["memory_forget", "memory_consolidate"] {
        for r in c.query(&format!("SELECT step, rows FROM agent_memory.{f}()"), &[]).unwrap() {
            let (s, n): (String, i64) = (r.get(0), r.get(1));
            if n > 0 {
                out.push(format!("{s} {n}"));
            }
        }
    }
    let stats =
        c.query_one("SELECT sum(active)::bigint, sum(archived)::bigint, sum(retired)::bigint FROM agent_memory.memory_stats", &[]).unwrap();
    format!(
        "{}; afterwards {} active ({} of them archived), {} retired",
        if out.is_empty() { "nothing changed".to_string() } else { out.join(", ") },
        stats.get::<_, Option<i64>>(0).unwrap_or(0),
        stats.get::<_, Option<i64>>(1).unwrap_or(0),
        stats.get::<_, Option<i64>>(2).unwrap_or(0)
    )
}

/// Hybrid recall under each way of fusing its channels that was tried: the table of what each
/// measured, with the settings that give it (the defaults last).
fn fusion_variants(c: &mut Client, convs: &[Conversation], questions: &[Question], ids: &HashMap<(String, String), i64>) -> String {
    const VARIANTS: &[(&str, &[(&str, &str)])] = &[
        (
            "reciprocal rank fusion of 20 per channel (0.8.0's defaults)",
            &[("hybrid_feedback", "0"), ("hybrid_fusion", "rrf"), ("hybrid_candidates", "20"), ("neighbour_share", "0")],
        ),
        ("reciprocal rank fusion of 50 per channel", &[("hybrid_feedback", "0"), ("hybrid_fusion", "rrf"), ("neighbour_share", "0")]),
        ("reciprocal rank fusion of 20, neighbours", &[("hybrid_feedback", "0"), ("hybrid_fusion", "rrf"), ("hybrid_candidates", "20")]),
        ("convex fusion of 20 per channel", &[("hybrid_feedback", "0"), ("hybrid_candidates", "20"), ("neighbour_share", "0")]),
        ("convex fusion of 50 per channel", &[("hybrid_feedback", "0"), ("neighbour_share", "0")]),
        ("convex fusion of 100 per channel", &[("hybrid_feedback", "0"), ("hybrid_candidates", "100"), ("neighbour_share", "0")]),
        ("convex fusion of 20, neighbours", &[("hybrid_feedback", "0"), ("hybrid_candidates", "20")]),
        ("convex fusion of 100, neighbours", &[("hybrid_feedback", "0"), ("hybrid_candidates", "100")]),
        ("convex fusion of 50, neighbours share 0.2", &[("hybrid_feedback", "0"), ("neighbour_share", "0.2")]),
        ("convex fusion of 50, neighbours share 0.5", &[("hybrid_feedback", "0"), ("neighbour_share", "0.5")]),
        ("convex fusion of 50, neighbours one on each side", &[("hybrid_feedback", "0"), ("neighbour_reach", "1")]),
        ("convex fusion of 50, neighbours three on each side", &[("hybrid_feedback", "0"), ("neighbour_reach", "3")]),
        ("convex fusion of 50, vector weight 0.4", &[("hybrid_feedback", "0"), ("hybrid_weight", "0.4")]),
        ("convex fusion of 50, vector weight 0.6", &[("hybrid_feedback", "0"), ("hybrid_weight", "0.6")]),
        ("convex fusion of 50, neighbours share 0.3, two on each side (0.9.0's defaults)", &[("hybrid_feedback", "0")]),
        ("… and the query moved towards the first ranking's best hit", &[("hybrid_feedback", "1")]),
        ("… towards its best 2", &[("hybrid_feedback", "2")]),
        ("… towards its best 4", &[("hybrid_feedback", "4")]),
        ("… towards its best 5", &[("hybrid_feedback", "5")]),
        ("… towards its best 3 (the defaults after 0.9.0: `hybrid_feedback` = 3)", &[]),
    ];
    let hybrid = [&MODES[3]];
    let mut rows = Vec::new();
    for (name, settings) in VARIANTS {
        let mut saved = Vec::new();
        for (n, v) in *settings {
            let n = format!("agent_memory.{n}");
            saved.push((n.clone(), c.query_one("SELECT current_setting($1)", &[&n]).unwrap().get::<_, String>(0)));
            c.execute("SELECT set_config($1, $2, false)", &[&n, v]).unwrap();
        }
        // Once to warm the backend's caches, once timed.
        ask(c, convs, questions, ids, &hybrid);
        let t = std::time::Instant::now();
        let scores = ask(c, convs, questions, ids, &hybrid);
        let per_call = t.elapsed().as_secs_f64() * 1000.0 / questions.len().max(1) as f64;
        let mut row = score_rows(&hybrid, &scores).remove(0);
        row[0] = name.to_string();
        row.push(format!("{per_call:.2}"));
        rows.push(row);
        for (n, v) in saved {
            c.execute("SELECT set_config($1, $2, false)", &[&n, &v]).unwrap();
        }
    }
    format!(
        "\n## How hybrid recall fuses its channels\n\n`memory_recall(..., query_text => q)` (the text-only call ranks the same way) under each \
         way of fusing that was tried, with the mean time of one call over a socket (the users packed, as the worker keeps them); settings `agent_memory.hybrid_fusion`, `hybrid_candidates`, `hybrid_weight`, `neighbour_share` and `neighbour_reach` (\"neighbours\": share 0.3, two on each side), and `hybrid_feedback` (the rows marked … rank twice: the query vector moved towards the mean of the first ranking's best hits, then ranked again with the same words; the rows above them rank once).\n\n{}\n\
         Tried and dropped, on a re-ranking of 0.8.0's hybrid results by the client (so not in this table): diversity \
         across sessions (at most 1, 2, 3 or 4 results of one session in the top 10: recall@10 0.423, 0.514, 0.561, 0.579 \
         against 0.594 for the same 60 fused candidates unchanged) lost in every category; the evidence of a multi-hop \
         question is often several turns of one session. A neighbour share taken as the larger of its own score and the \
         hit's share (instead of added to it) measured 0.673–0.690 against 0.713 (one neighbour on each side, 100 candidates). Query expansion by the words of \
         the best hits (the text of the top 1, 2 or 3 hybrid results added to the question's words, then hybrid recall \
         again, through SQL) measured 0.637, 0.662 and 0.683 against 0.729: the hits' other words pull in more of their \
         own topic than of the question's. A session channel (every memory given 0.05, 0.1 or 0.2 of the best score in \
         its session, sessions split where 30 minutes pass between memories; on the client, over the defaults' fusion) \
         changed recall@10 by +0.004, +0.001 and +0.001 and lowered multi-hop by 0.006 to 0.012.\n",
        table(&[HEADER, &["ms per call"]].concat(), &rows)
    )
}

// --- The channels side by side, through text alone, on both sets ---------------------------------

/// A question as the text-only comparison asks it.
struct Asked {
    user: String,
    text: String,
    evidence: Vec<String>,
    kind: String,
}

/// The three rankings of a text question: the vector channel alone (the question embedded by the
/// server, passed as a vector), the keyword channel alone, and the default text call (both,
/// fused).
const CHANNELS: &[(&str, &str)] = &[
    (
        "vector only",
        "SELECT id FROM agent_memory.memory_recall($1, agent_memory.memory_embed($2), 10, model => 'all-MiniLM-L6-v2', touch => false)",
    ),
    (
        "keyword only",
        "SELECT id FROM agent_memory.memory_recall($1, NULL::vector, 10, model => 'all-MiniLM-L6-v2', touch => false, query_text => $2)",
    ),
    ("fused (the default text call)", "SELECT id FROM agent_memory.memory_recall($1, $2::text, 10, touch => false)"),
];

/// Per channel, per kind ("all" too): sums of recall@5 and @10, and the count; and per channel
/// the mean time of a call in ms.
type ChannelScores = (Vec<BTreeMap<String, (f64, f64, usize)>>, Vec<f64>);

fn ask_channels(c: &mut Client, questions: &[Asked], by_id: &HashMap<i64, String>) -> ChannelScores {
    let mut scores = vec![BTreeMap::new(); CHANNELS.len()];
    let mut ms = vec![0.0; CHANNELS.len()];
    for (ci, (_, sql)) in CHANNELS.iter().enumerate() {
        // Once to warm the backend (the model, the plans), then each question timed.
        if let Some(q) = questions.first() {
            c.query(*sql, &[&q.user, &q.text]).unwrap();
        }
        let t = std::time::Instant::now();
        for q in questions {
            let ranked: Vec<String> = c
                .query(*sql, &[&q.user, &q.text])
                .unwrap()
                .iter()
                .map(|r| by_id.get(&r.get::<_, i64>(0)).cloned().unwrap_or_default())
                .collect();
            let evidence: HashSet<&str> = q.evidence.iter().map(String::as_str).collect();
            let hits = |k: usize| -> f64 {
                if evidence.is_empty() {
                    return 0.0;
                }
                ranked.iter().take(k).filter(|t| evidence.contains(t.as_str())).count() as f64 / evidence.len() as f64
            };
            let (r5, r10) = (hits(5), hits(10));
            for kind in ["all".to_string(), q.kind.clone()] {
                let e = scores[ci].entry(kind).or_insert((0.0, 0.0, 0));
                e.0 += r5;
                e.1 += r10;
                e.2 += 1;
            }
        }
        ms[ci] = t.elapsed().as_secs_f64() * 1000.0 / questions.len().max(1) as f64;
    }
    (scores, ms)
}

/// The table of `ask_channels`, a row per kind (all first), and the worst margin of the fused
/// call over its best channel at k = 5 and 10, over the kinds.
fn channel_table(scores: &ChannelScores, kinds: &[(String, String)]) -> (String, f64, f64) {
    let (per, ms) = scores;
    let mut rows = Vec::new();
    let (mut worst5, mut worst10) = (f64::INFINITY, f64::INFINITY);
    for (kind, label) in std::iter::once(&("all".to_string(), "all".to_string())).chain(kinds) {
        let Some(n) = per[0].get(kind).map(|e| e.2) else { continue };
        let mut row = vec![label.clone(), n.to_string()];
        let at = |ci: usize| per[ci].get(kind).map(|e| (e.0 / e.2 as f64, e.1 / e.2 as f64)).unwrap_or((0.0, 0.0));
        let (v, k, f) = (at(0), at(1), at(2));
        for (a, b) in [v, k, f] {
            row.push(format!("{a:.3}"));
            row.push(format!("{b:.3}"));
        }
        let (m5, m10) = (f.0 - v.0.max(k.0), f.1 - v.1.max(k.1));
        row.push(format!("{m5:+.3} / {m10:+.3}"));
        worst5 = worst5.min(m5);
        worst10 = worst10.min(m10);
        rows.push(row);
    }
    let mut last = vec!["ms per call".to_string(), String::new()];
    for m in ms {
        last.push(format!("{m:.2}"));
        last.push(String::new());
    }
    last.push(String::new());
    rows.push(last);
    let header = [
        "kind",
        "questions",
        "vector @5",
        "vector @10",
        "keyword @5",
        "keyword @10",
        "fused @5",
        "fused @10",
        "fused − best channel @5 / @10",
    ];
    (table(&header, &rows), worst5, worst10)
}

/// LoCoMo's categories by number, as the questions carry them.
fn locomo_kinds() -> Vec<(String, String)> {
    [(1, "multi-hop"), (2, "temporal"), (3, "open-domain"), (4, "single-hop")].iter().map(|(n, l)| (n.to_string(), l.to_string())).collect()
}

/// The LongMemEval development questions of `dir` (one file a question, its own history), loaded
/// as one user a question: every turn an episodic memory written as text (embedded by the server,
/// a user's turns in one call), dated so that "now" is the question's date. Returns the questions
/// and the memories' turn ids by memory id.
fn load_longmem(c: &mut Client, dir: &std::path::Path) -> (Vec<Asked>, HashMap<i64, String>) {
    // QUALITY_REUSE=1: the histories a previous run wrote are asked again (for tuning; the
    // embeddings take most of the run).
    let reuse = std::env::var("QUALITY_REUSE").is_ok()
        && c.query_one(
            "SELECT to_regclass('eval_lme') IS NOT NULL AND EXISTS (SELECT 1 FROM agent_memory.memories WHERE user_id LIKE 'lme-%')",
            &[],
        )
        .map(|r| r.get::<_, bool>(0))
        .unwrap_or(false);
    if !reuse {
        c.batch_execute(
            "SET client_min_messages = warning;
             DROP EXTENSION IF EXISTS agent_memory CASCADE; CREATE EXTENSION agent_memory CASCADE;
             DROP TABLE IF EXISTS eval_lme; CREATE TABLE eval_lme (user_id text, ord int, turn_id text, content text, at timestamp, asked timestamp);",
        )
        .unwrap();
    }
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut questions = Vec::new();
    let mut rows = String::new();
    for f in &files {
        let user = f.file_stem().unwrap().to_string_lossy().to_string();
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
        let q = &v["questions"][0];
        let asked = q["question_date"].as_str().unwrap().to_string();
        for (i, t) in v["turns"].as_array().unwrap().iter().enumerate() {
            let clean = t["text"].as_str().unwrap().replace(['\t', '\n', '\r'], " ").replace('\\', "\\\\");
            rows += &format!("{user}\t{i}\t{}\t{clean}\t{}\t{asked}\n", t["id"].as_str().unwrap(), t["at"].as_str().unwrap());
        }
        questions.push(Asked {
            user,
            text: q["question"].as_str().unwrap().to_string(),
            evidence: q["evidence"].as_array().unwrap().iter().filter_map(|x| x.as_str().map(str::to_string)).collect(),
            kind: q["category"].as_str().unwrap_or("unknown").to_string(),
        });
    }
    let users: Vec<String> = if reuse { Vec::new() } else { questions.iter().map(|q| q.user.clone()).collect() };
    if !reuse {
        let mut w = c.copy_in("COPY eval_lme FROM STDIN").unwrap();
        w.write_all(rows.as_bytes()).unwrap();
        w.finish().unwrap();
    }
    for user in &users {
        c.execute(
            "INSERT INTO agent_memory.memories (user_id, kind, content, emb, embedding_model, created_at, last_hit_at, source)
             SELECT e.user_id, 'episodic', e.content, v.embedding, 'all-MiniLM-L6-v2', now() - (e.asked - e.at), now() - (e.asked - e.at), e.turn_id
               FROM eval_lme e
               JOIN agent_memory.memory_embed((SELECT array_agg(x.content ORDER BY x.ord) FROM eval_lme x WHERE x.user_id = $1)) v
                 ON v.ordinal = e.ord + 1
              WHERE e.user_id = $1",
            &[user],
        )
        .unwrap();
    }
    c.batch_execute("SELECT agent_memory.memory_pack(u) FROM (SELECT DISTINCT user_id AS u FROM agent_memory.memories) s").unwrap();
    c.batch_execute("VACUUM ANALYZE agent_memory.memories").unwrap();
    let by_id = c
        .query("SELECT id, source FROM agent_memory.memories", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get::<_, i64>(0), r.get::<_, String>(1)))
        .collect();
    (questions, by_id)
}

/// Both sets through text alone, each channel beside the fused call (`QUALITY_CHANNELS_ONLY=1`
/// runs only this).
fn channels_on_both_sets(c: &mut Client, convs: &[Conversation], questions: &[Question]) -> String {
    let mut out = String::from(
        "\n## The channels beside the fused call, through text alone, on both sets\n\nEvery turn written as text and \
         embedded by the server; each question asked as text three ways: the vector channel alone (the question embedded \
         by the server and passed as a vector), the keyword channel alone (`query => NULL, query_text => q`), and the default \
         text call, which fuses both. The last column is the fused call's margin over the better of the two channels (the \
         target: never below −0.01 in any kind).\n",
    );
    let t = std::time::Instant::now();
    let ids = load(c, convs, false, true);
    let by_id: HashMap<i64, String> = ids.iter().map(|((_, t), id)| (*id, t.clone())).collect();
    let asked: Vec<Asked> = questions
        .iter()
        .map(|q| Asked { user: q.user.clone(), text: q.text.clone(), evidence: q.evidence.clone(), kind: q.category.to_string() })
        .collect();
    let scores = ask_channels(c, &asked, &by_id);
    out += &format!("\n### LoCoMo ({} questions; loaded and asked in {:.0} s)\n\n", asked.len(), t.elapsed().as_secs_f64());
    let (tab, w5, w10) = channel_table(&scores, &locomo_kinds());
    out += &tab;
    out +=
        &format!("\nWorst margin of the fused call over its best channel, over the categories: {w5:+.3} at k = 5, {w10:+.3} at k = 10.\n");
    out += &variants(c, &asked, &by_id, &locomo_kinds());
    if std::env::var("QUALITY_SIMULATE").is_ok() {
        out += &simulate(c, &asked, &by_id, "LoCoMo");
    }
    let dir = std::env::var("AGENT_MEMORY_LONGMEM")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| std::path::PathBuf::from(std::env::var("AGENT_MEMORY_EVAL").unwrap()).join("../longmemeval"));
    if dir.is_dir() {
        // A database of its own, so that QUALITY_REUSE can ask a previous run's histories again.
        let mut admin = connect("postgres");
        if admin.query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&LME_DB]).unwrap().is_none() {
            admin.batch_execute(&format!("CREATE DATABASE {LME_DB}")).unwrap();
        }
        let c = &mut connect(LME_DB);
        c.batch_execute("SET agent_memory.embed_max_bytes = 67108864").unwrap();
        let t = std::time::Instant::now();
        let (lme, by_id) = load_longmem(c, &dir);
        let loaded = t.elapsed().as_secs_f64();
        let t = std::time::Instant::now();
        let scores = ask_channels(c, &lme, &by_id);
        let mut kinds: Vec<String> = lme.iter().map(|q| q.kind.clone()).collect();
        kinds.sort();
        kinds.dedup();
        let kinds: Vec<(String, String)> = kinds.into_iter().map(|k| (k.clone(), k)).collect();
        out += &format!(
            "\n### LongMemEval development questions ({} questions, {} turns written in {loaded:.0} s; asked in {:.0} s)\n\n",
            lme.len(),
            by_id.len(),
            t.elapsed().as_secs_f64()
        );
        let (tab, w5, w10) = channel_table(&scores, &kinds);
        out += &tab;
        out +=
            &format!("\nWorst margin of the fused call over its best channel, over the kinds: {w5:+.3} at k = 5, {w10:+.3} at k = 10.\n");
        out += &variants(c, &lme, &by_id, &kinds);
        if std::env::var("QUALITY_SIMULATE").is_ok() {
            out += &simulate(c, &lme, &by_id, "LongMemEval");
        }
    } else {
        out += &format!("\n(The LongMemEval questions are not at {}: skipped.)\n", dir.display());
    }
    println!("{out}");
    out
}

/// Each channel's top 50 for a question, `(id, score)` best first: the vector channel's and the
/// keyword channel's, as the fused call gets them.
type Lists = (Vec<(i64, f64)>, Vec<(i64, f64)>);

fn channel_lists(c: &mut Client, q: &Asked) -> Lists {
    let get = |c: &mut Client, sql: &str| -> Vec<(i64, f64)> {
        c.query(sql, &[&q.user, &q.text]).unwrap().iter().map(|r| (r.get::<_, i64>(0), r.get::<_, f64>(1))).collect()
    };
    (
        get(c, "SELECT id, score FROM agent_memory.memory_recall($1, agent_memory.memory_embed($2), 50, model => 'all-MiniLM-L6-v2', touch => false)"),
        get(c, "SELECT id, score FROM agent_memory.memory_recall($1, NULL::vector, 50, model => 'all-MiniLM-L6-v2', touch => false, query_text => $2)"),
    )
}

/// A channel's scores min-max scaled over its list (best 1, last 0).
fn scaled(list: &[(i64, f64)]) -> Vec<(i64, f64)> {
    let (lo, hi) = list.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), r| (lo.min(r.1), hi.max(r.1)));
    list.iter().map(|(id, s)| (*id, if hi > lo { (s - lo) / (hi - lo) } else { 1.0 })).collect()
}

/// How sure a channel is of its list: 1 − the mean of its scaled scores over the top `n` (a
/// list whose best stand far above the rest is sure; a flat one is not).
fn sureness(list: &[(i64, f64)], n: usize) -> f64 {
    let s = scaled(list);
    let top: Vec<f64> = s.iter().take(n).map(|r| r.1).collect();
    if top.is_empty() {
        return 0.0;
    }
    1.0 - top.iter().sum::<f64>() / top.len() as f64
}

fn weighted_sum(lists: &[(&[(i64, f64)], f64)]) -> Vec<i64> {
    let mut score: HashMap<i64, f64> = HashMap::new();
    let mut best: HashMap<i64, usize> = HashMap::new();
    for (list, w) in lists {
        for (r, (id, s)) in list.iter().enumerate() {
            *score.entry(*id).or_insert(0.0) += w * s;
            let b = best.entry(*id).or_insert(usize::MAX);
            *b = (*b).min(r);
        }
    }
    let mut ids: Vec<i64> = score.keys().copied().collect();
    ids.sort_by(|a, b| score[b].total_cmp(&score[a]).then(best[a].cmp(&best[b])).then(b.cmp(a)));
    ids
}

/// Ways of fusing the two lists, tried on the client (no feedback and no neighbours: compare with
/// the server's `hybrid_feedback = 0, neighbour_share = 0`).
/// A way of fusing the two lists into one ranking.
type Fusion = Box<dyn Fn(&Lists) -> Vec<i64>>;

fn fusions() -> Vec<(&'static str, Fusion)> {
    vec![
        ("convex 0.5 (the server's fusion, plain)", Box::new(|l: &Lists| weighted_sum(&[(&scaled(&l.0), 0.5), (&scaled(&l.1), 0.5)]))),
        (
            "convex, each channel weighted by its sureness over its top 10",
            Box::new(|l: &Lists| {
                let (a, b) = (sureness(&l.0, 10).max(1e-6), sureness(&l.1, 10).max(1e-6));
                weighted_sum(&[(&scaled(&l.0), a / (a + b)), (&scaled(&l.1), b / (a + b))])
            }),
        ),
        (
            "convex, sureness over the top 20",
            Box::new(|l: &Lists| {
                let (a, b) = (sureness(&l.0, 20).max(1e-6), sureness(&l.1, 20).max(1e-6));
                weighted_sum(&[(&scaled(&l.0), a / (a + b)), (&scaled(&l.1), b / (a + b))])
            }),
        ),
        (
            "z-scores summed (each channel centred on its mean, over its spread)",
            Box::new(|l: &Lists| {
                let z = |list: &[(i64, f64)]| -> Vec<(i64, f64)> {
                    let n = list.len().max(1) as f64;
                    let m = list.iter().map(|r| r.1).sum::<f64>() / n;
                    let sd = (list.iter().map(|r| (r.1 - m).powi(2)).sum::<f64>() / n).sqrt().max(1e-9);
                    list.iter().map(|(id, s)| (*id, (s - m) / sd)).collect()
                };
                weighted_sum(&[(&z(&l.0), 0.5), (&z(&l.1), 0.5)])
            }),
        ),
        (
            "convex 0.5, then each channel's best 2 kept in the top 10",
            Box::new(|l: &Lists| {
                let fused = weighted_sum(&[(&scaled(&l.0), 0.5), (&scaled(&l.1), 0.5)]);
                let must: Vec<i64> = l.0.iter().take(2).chain(l.1.iter().take(2)).map(|r| r.0).collect();
                let mut top: Vec<i64> = fused.iter().take(10).copied().collect();
                for m in must {
                    if !top.contains(&m) {
                        if let Some(pos) = top.iter().rposition(|x| !l.0.iter().take(2).chain(l.1.iter().take(2)).any(|r| r.0 == *x)) {
                            top.remove(pos);
                        }
                        top.push(m);
                    }
                }
                let order: HashMap<i64, usize> = fused.iter().enumerate().map(|(i, id)| (*id, i)).collect();
                top.sort_by_key(|id| order.get(id).copied().unwrap_or(usize::MAX));
                top
            }),
        ),
    ]
}

/// QUALITY_SIMULATE=1: the fusions of `fusions()` on the client, over each question's two lists;
/// a row per fusion, the worst margin over the best channel across the kinds, at k = 5 and 10.
fn simulate(c: &mut Client, questions: &[Asked], by_id: &HashMap<i64, String>, name: &str) -> String {
    let lists: Vec<Lists> = questions.iter().map(|q| channel_lists(c, q)).collect();
    let recall = |ranked: &[i64], q: &Asked, k: usize| -> f64 {
        if q.evidence.is_empty() {
            return 0.0;
        }
        let ev: HashSet<&str> = q.evidence.iter().map(String::as_str).collect();
        ranked.iter().take(k).filter(|id| by_id.get(id).is_some_and(|t| ev.contains(t.as_str()))).count() as f64 / ev.len() as f64
    };
    let mut kinds: Vec<String> = questions.iter().map(|q| q.kind.clone()).collect();
    kinds.sort();
    kinds.dedup();
    let mean = |f: &dyn Fn(&Lists) -> Vec<i64>, k: usize, kind: Option<&str>| -> f64 {
        let sel: Vec<usize> = (0..questions.len()).filter(|&i| kind.is_none_or(|x| questions[i].kind == x)).collect();
        sel.iter().map(|&i| recall(&f(&lists[i]), &questions[i], k)).sum::<f64>() / sel.len().max(1) as f64
    };
    let vector = |l: &Lists| l.0.iter().map(|r| r.0).collect::<Vec<i64>>();
    let keyword = |l: &Lists| l.1.iter().map(|r| r.0).collect::<Vec<i64>>();
    let mut rows = Vec::new();
    for (fname, f) in fusions() {
        let (mut w5, mut w10) = (f64::INFINITY, f64::INFINITY);
        for kind in &kinds {
            for (k, w) in [(5, &mut w5), (10, &mut w10)] {
                let best = mean(&vector, k, Some(kind)).max(mean(&keyword, k, Some(kind)));
                *w = w.min(mean(f.as_ref(), k, Some(kind)) - best);
            }
        }
        rows.push(vec![
            fname.to_string(),
            format!("{:.3}", mean(f.as_ref(), 5, None)),
            format!("{:.3}", mean(f.as_ref(), 10, None)),
            format!("{w5:+.3} / {w10:+.3}"),
        ]);
    }
    format!("\n#### Fusions tried on the client, {name}\n\n{}", table(&["fusion", "@5", "@10", "worst margin @5 / @10"], &rows))
}

/// QUALITY_VARIANTS="name:agent_memory.a=1,agent_memory.b=2;name2:...": the channels again under
/// each set of settings (for tuning), one line each.
fn variants(c: &mut Client, questions: &[Asked], by_id: &HashMap<i64, String>, kinds: &[(String, String)]) -> String {
    let mut out = String::new();
    for spec in std::env::var("QUALITY_VARIANTS").unwrap_or_default().split(';').filter(|s| !s.trim().is_empty()) {
        let (name, sets) = spec.split_once(':').expect("QUALITY_VARIANTS: name:setting=value,...");
        let mut saved = Vec::new();
        for kv in sets.split(',').filter(|s| !s.trim().is_empty()) {
            let (n, v) = kv.split_once('=').expect("QUALITY_VARIANTS: name:setting=value,...");
            saved.push((n.trim().to_string(), c.query_one("SELECT current_setting($1)", &[&n.trim()]).unwrap().get::<_, String>(0)));
            c.execute("SELECT set_config($1, $2, false)", &[&n.trim(), &v.trim()]).unwrap();
        }
        let s = ask_channels(c, questions, by_id);
        let (_, w5, w10) = channel_table(&s, kinds);
        let all = s.0[2].get("all").map(|e| (e.0 / e.2 as f64, e.1 / e.2 as f64)).unwrap_or_default();
        out += &format!("variant {name}: fused @5 {:.3} @10 {:.3}; worst margin {w5:+.3} / {w10:+.3}\n", all.0, all.1);
        for (n, v) in saved {
            c.execute("SELECT set_config($1, $2, false)", &[&n, &v]).unwrap();
        }
    }
    out
}

/// The ranked rows of one recall mode's SQL for a question (`$3` is its text when the mode uses it).
fn run_mode(c: &mut Client, sql: &str, q: &Question) -> Result<Vec<postgres::Row>, postgres::Error> {
    let v = Vector::from(q.emb.clone());
    if !sql.contains("$2") {
        c.query(&sql.replace("$3", "$2"), &[&q.user, &q.text])
    } else if sql.contains("$3") {
        c.query(sql, &[&q.user, &v, &q.text, &MODEL])
    } else {
        c.query(&sql.replace("$4", "$3"), &[&q.user, &v, &MODEL])
    }
}

fn main() {
    let dir = std::path::PathBuf::from(std::env::var("AGENT_MEMORY_EVAL").expect("AGENT_MEMORY_EVAL: the folder of the conversations"));
    let (convs, questions) = load_data(&dir);
    println!("{} conversations, {} turns, {} questions", convs.len(), convs.iter().map(|c| c.turns.len()).sum::<usize>(), questions.len());
    let mut admin = connect("postgres");
    if admin.query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&DB]).unwrap().is_none() {
        admin.batch_execute(&format!("CREATE DATABASE {DB}")).unwrap();
    }
    let mut c = connect(DB);
    // QUALITY_SET="agent_memory.a=1;agent_memory.b=2": settings for this run's session (for tuning).
    for kv in std::env::var("QUALITY_SET").unwrap_or_default().split(';').filter(|s| !s.trim().is_empty()) {
        let (name, value) = kv.split_once('=').expect("QUALITY_SET: name=value;...");
        c.execute("SELECT set_config($1, $2, false)", &[&name.trim(), &value.trim()]).unwrap();
        println!("set {} = {}", name.trim(), value.trim());
    }
    // Long texts are written in calls of up to a user's whole history.
    c.batch_execute("SET agent_memory.embed_max_bytes = 67108864").unwrap();
    let only_before = std::env::var("QUALITY_ONLY_BEFORE").is_ok();
    if std::env::var("QUALITY_CHANNELS_ONLY").is_ok() {
        let out = channels_on_both_sets(&mut c, &convs, &questions);
        if let Ok(path) = std::env::var("BENCH_OUT") {
            std::fs::write(path, &out).unwrap();
        }
        return;
    }
    let mut report = String::new();
    let all: Vec<&Mode> = MODES.iter().collect();
    let started = std::time::Instant::now();

    let mut ids = load(&mut c, &convs, false, false);
    // QUALITY_SQL: a statement run after loading (for experiments).
    if let Ok(sql) = std::env::var("QUALITY_SQL") {
        c.batch_execute(&sql).unwrap();
    }
    println!("\n## Before maintenance\n");
    let before = ask(&mut c, &convs, &questions, &ids, &all);
    report += "## Before maintenance\n\n";
    report += &table(HEADER, &score_rows(&all, &before));
    let share = context_share(&mut c, &questions);
    let hybrid10 = overall_recall10(&before[3]);
    let line = format!(
        "\n`memory_context(user, last session, query, query_text, token_budget => 1000)`: {share:.3} of each question's evidence is inside the context \
         (the last session's last 8 turns, then the best long-term memories that fit; hybrid recall@10: {hybrid10:.3}).\n"
    );
    println!("{line}");
    report += &line;
    let fusion = fusion_variants(&mut c, &convs, &questions, &ids);
    println!("{fusion}");
    report += &fusion;

    // The same questions through text alone: every turn embedded by the server as it is written,
    // every question given as text (QUALITY_NO_TEXT=1 skips it).
    if std::env::var("QUALITY_NO_TEXT").is_err() {
        let t = std::time::Instant::now();
        let text_ids = load(&mut c, &convs, false, true);
        let loaded = t.elapsed().as_secs_f64();
        let text_mode = [&TEXT_MODE];
        let t = std::time::Instant::now();
        let scores = ask(&mut c, &convs, &questions, &text_ids, &text_mode);
        let asked = t.elapsed().as_secs_f64();
        let text10 = overall_recall10(&scores[0]);
        let title = "Through text alone: turns embedded by the server as they are written, questions as text";
        let line = format!(
            "Turns inserted with `emb` from `memory_embed(content[])` ({loaded:.0} s for {} turns, packs and VACUUM included), \
             then each question as text ({asked:.0} s for {} questions). recall@10 {text10:.3} against {hybrid10:.3} for hybrid \
             recall with the shipped vectors: a difference of {:.3}.\n\n",
            convs.iter().map(|c| c.turns.len()).sum::<usize>(),
            questions.len(),
            (text10 - hybrid10).abs()
        );
        println!("\n## {title}\n\n{line}");
        report += &format!("\n## {title}\n\n{line}");
        report += &table(HEADER, &score_rows(&text_mode, &scores));
        // The later scenarios start from the shipped vectors again.
        if !only_before {
            ids = load(&mut c, &convs, false, false);
            load_turns(&mut c);
        }
    }

    let product: Vec<&Mode> = MODES.iter().filter(|m| m.sql.is_some()).collect();
    for (title, aged) in if only_before {
        vec![]
    } else {
        vec![
            ("After `memory_forget()` and `memory_consolidate()` with default settings", false),
            ("Time as well as size: each turn's `expires_at` from the retention rule at the time it was said, then both passes", true),
        ]
    } {
        let ids = if aged { load(&mut c, &convs, true, false) } else { ids.clone() };
        let what = passes(&mut c);
        let (gone, total) = evidence_gone(&mut c, &questions, &ids);
        println!(
            "\n## {title}\n\npasses: {what}\nevidence no longer recallable: {gone} of {total} ({:.1}%)\n",
            100.0 * gone as f64 / total as f64
        );
        report += &format!(
            "\n## {title}\n\nPasses: {what}.\nEvidence no longer recallable: {gone} of {total} turns ({:.1}%).\n\n",
            100.0 * gone as f64 / total as f64
        );
        let after = ask(&mut c, &convs, &questions, &ids, &product);
        report += &table(HEADER, &score_rows(&product, &after));
        let ratio: Vec<String> = product
            .iter()
            .zip(&after)
            .zip(before.iter().skip(1))
            .filter_map(|((m, a), b)| Some(format!("{}: {:.1}%", m.name, 100.0 * a.get(&0)?.1 / b.get(&0)?.1.max(1e-9))))
            .collect();
        println!("recall@10 after / before: {}", ratio.join("; "));
        report += &format!("\nrecall@10 after / before: {}.\n", ratio.join("; "));
    }
    if std::env::var("QUALITY_NO_TEXT").is_err() {
        report += &channels_on_both_sets(&mut c, &convs, &questions);
    }
    println!("\n({:.0} s)", started.elapsed().as_secs_f64());
    if let Ok(path) = std::env::var("BENCH_OUT") {
        std::fs::write(path, &report).unwrap();
    }
    if let Ok(path) = std::env::var("QUALITY_DOC") {
        let doc = format!(
            "# Memory quality on real conversations\n\n\
             Written by `bench/run.sh quality` ({} questions over {} conversations, {:.0} s here). Evidence recall@k of a \
             question is the share of its evidence turns in the top k; the tables give the mean over all questions, and \
             recall@10 per question category.\n\n\
             **The data.** Five long multi-session conversations between two people (2,760 dated turns) and 760 questions \
             annotated with the turns that answer them, from the LoCoMo benchmark (Maharana et al., ACL 2024, licensed \
             CC BY-NC 4.0), with all-MiniLM-L6-v2 embeddings of every turn and question, as shipped in `shared/eval/`. \
             Each conversation is one user; every turn is an episodic memory dated at its session's time, shifted so \
             that \"now\" is one day after the last turn; questions are asked with `touch => false`, through the users' packs (embeddings and words, `memory_pack`, \
             as the background worker builds them, on a vacuumed table). Nine questions have \
             malformed evidence ids and count as misses for every ranking.\n\n\
             **The baseline** is exact cosine similarity computed by the client: what a bare pgvector table returns.\n\n\
             **Reproduce:** `bench/run.sh quality` (it starts its own server; `AGENT_MEMORY_EVAL` may name another folder \
             of conversations in the same format). Round 4 (each channel beside the fused call on LoCoMo and on long \
             user–assistant chat histories, and the fusions tried): [quality-round4.md](quality-round4.md).\n\n{report}",
            questions.len(),
            convs.len(),
            started.elapsed().as_secs_f64()
        );
        std::fs::write(path, doc).unwrap();
    }
}
