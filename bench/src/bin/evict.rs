//! The eviction simulation of the brief: 1,230 memories over 90 days (60 hard facts, 720 phase
//! preferences, 450 one-off items), three question streams, six policies. Prints hit rate, rows
//! kept and hard facts kept per stream. No server: the policies are simulated in memory, and
//! this product's policy is the one `memory_forget` runs (the same `agent_memory_core` code for
//! the retention score, the halving of hit counts and retention).
//!
//! The streams:
//! * dialogue: 40 questions a day; 15% about a hard fact, 75% about a preference (mostly the
//!   current 15-day phase, some from earlier phases), 10% follow-ups on a recent one-off item;
//! * scans: the same dialogue with bulk reads mixed in (27% of operations), each reading 60
//!   random stored memories — an export or an analytics job;
//! * shift: a hot spot; until day 45, 80% of preference questions go to 100 early preferences,
//!   after day 45 to 100 later ones.
//!
//! Policies evict once a day. A question hits when the memory it needs is still stored.

use agent_memory_core::forget::{halve_hits, select_evictions, Keepable, RetentionWeights};
use agent_memory_core::policy::Retention;
use agent_memory_tests::Rng;

const DAYS: u32 = 90;
const CAPACITY: usize = 400;
const HARD: usize = 60;
const PREFS: usize = 720;
const ONE_OFFS: usize = 450;
const PHASE_DAYS: u32 = 15;
const QUESTIONS_PER_DAY: usize = 40;
const SCAN_SHARE: f64 = 0.27;
const SCAN_ROWS: usize = 60;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Hard,
    Pref,
    OneOff,
}

#[derive(Clone)]
struct Memory {
    kind: Kind,
    created: f64, // hours
    importance: f64,
    protected: bool,
    semantic: bool,
    /// Real recalls (dialogue questions): what this product's policy reads.
    last_hit: f64,
    hits: i32,
    /// Every read, scans included, and never aged: what a cache-like policy sees.
    last_use: f64,
    uses: u32,
    stored: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Stream {
    Dialogue,
    Scans,
    Shift,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Policy {
    Ttl30,
    Lru,
    Lfu,
    ImportanceUnused,
    Hybrid,
    Product,
}

impl Policy {
    fn name(self) -> &'static str {
        match self {
            Policy::Ttl30 => "TTL 30 d",
            Policy::Lru => "LRU(400)",
            Policy::Lfu => "LFU(400)",
            Policy::ImportanceUnused => "importance + 30 d unused",
            Policy::Hybrid => "hybrid score + hard-fact protection",
            Policy::Product => "agent_memory (memory_forget)",
        }
    }
}

struct Outcome {
    questions: u64,
    hits: u64,
    rows_end: usize,
    rows_max: usize,
    hard_kept: usize,
}

/// The memories, in order of creation, identical for every policy of a stream.
fn memories(rng: &mut Rng) -> Vec<Memory> {
    let mut out = Vec::new();
    let mut add = |kind: Kind, created: f64, rng: &mut Rng| {
        let (importance, protected, semantic) = match kind {
            Kind::Hard => (0.9, true, true),
            // "Prefers ..." gets the preference bonus of the importance rule.
            Kind::Pref => (0.8, false, true),
            Kind::OneOff => (0.5 + 0.1 * (rng.next_u64() % 3) as f64, false, false),
        };
        out.push(Memory {
            kind,
            created,
            importance,
            protected,
            semantic,
            last_hit: created,
            hits: 0,
            last_use: created,
            uses: 0,
            stored: true,
        });
    };
    for i in 0..HARD {
        add(Kind::Hard, (i as f64 / HARD as f64) * 48.0, rng);
    }
    for i in 0..PREFS {
        add(Kind::Pref, (i as f64 / PREFS as f64) * (DAYS as f64) * 24.0, rng);
    }
    for i in 0..ONE_OFFS {
        add(Kind::OneOff, (i as f64 / ONE_OFFS as f64) * (DAYS as f64) * 24.0 + 0.5, rng);
    }
    out.sort_by(|a, b| a.created.total_cmp(&b.created));
    out
}

/// One operation of a stream's day: a question about memory i, or a scan.
enum Op {
    Ask(usize),
    Scan,
}

fn pick_zipf(rng: &mut Rng, n: usize) -> usize {
    // P(rank r) ∝ 1 / (r + 1), by inversion of the harmonic CDF (approximate, deterministic).
    let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    let r = ((n as f64 + 1.0).powf(u) - 1.0).floor() as usize;
    r.min(n - 1)
}

fn day_ops(stream: Stream, day: u32, mems: &[Memory], rng: &mut Rng) -> Vec<(f64, Op)> {
    let now_h = day as f64 * 24.0;
    let existing = |pred: &dyn Fn(&Memory) -> bool| -> Vec<usize> {
        mems.iter().enumerate().filter(|(_, m)| m.created <= now_h && pred(m)).map(|(i, _)| i).collect()
    };
    let hard = existing(&|m| m.kind == Kind::Hard);
    let prefs = existing(&|m| m.kind == Kind::Pref);
    let phase = day / PHASE_DAYS;
    let in_phase =
        |p: u32| -> Vec<usize> { prefs.iter().copied().filter(|&i| (mems[i].created / 24.0) as u32 / PHASE_DAYS == p).collect() };
    let current = in_phase(phase);
    let earlier: Vec<usize> = prefs.iter().copied().filter(|&i| ((mems[i].created / 24.0) as u32 / PHASE_DAYS) < phase).collect();
    let recent_one_offs = existing(&|m| m.kind == Kind::OneOff && now_h - m.created < 48.0);
    // The hot spots of the shift stream: 100 preferences of the first weeks, then 100 of the later.
    let hot_early: Vec<usize> = prefs.iter().copied().filter(|&i| mems[i].created < 20.0 * 24.0).take(100).collect();
    let hot_late: Vec<usize> = prefs.iter().copied().filter(|&i| mems[i].created >= 45.0 * 24.0).take(100).collect();

    let mut ops = Vec::new();
    let questions = QUESTIONS_PER_DAY;
    let scans = if stream == Stream::Scans { ((questions as f64) * SCAN_SHARE / (1.0 - SCAN_SHARE)).round() as usize } else { 0 };
    for _ in 0..questions {
        let t = now_h + (rng.next_u64() % 24_000) as f64 / 1000.0;
        let roll = rng.next_u64() % 100;
        let target = if roll < 15 && !hard.is_empty() {
            Some(hard[(rng.next_u64() % hard.len() as u64) as usize])
        } else if roll < 90 {
            match stream {
                Stream::Shift => {
                    let hot = if day < 45 { &hot_early } else { &hot_late };
                    let hot: Vec<usize> = hot.iter().copied().filter(|&i| mems[i].created <= t).collect();
                    if !hot.is_empty() && rng.next_u64() % 100 < 80 {
                        Some(hot[pick_zipf(rng, hot.len())])
                    } else if !prefs.is_empty() {
                        Some(prefs[prefs.len() - 1 - pick_zipf(rng, prefs.len())])
                    } else {
                        None
                    }
                }
                _ => {
                    let cur: Vec<usize> = current.iter().copied().filter(|&i| mems[i].created <= t).collect();
                    if !cur.is_empty() && (earlier.is_empty() || rng.next_u64() % 100 < 80) {
                        Some(cur[pick_zipf(rng, cur.len())])
                    } else if !earlier.is_empty() {
                        // Older phases: the most recent ones are asked about most.
                        Some(earlier[earlier.len() - 1 - pick_zipf(rng, earlier.len())])
                    } else {
                        None
                    }
                }
            }
        } else if !recent_one_offs.is_empty() {
            Some(recent_one_offs[(rng.next_u64() % recent_one_offs.len() as u64) as usize])
        } else {
            None
        };
        if let Some(i) = target {
            if mems[i].created <= t {
                ops.push((t, Op::Ask(i)));
            }
        }
    }
    for _ in 0..scans {
        ops.push((now_h + (rng.next_u64() % 24_000) as f64 / 1000.0, Op::Scan));
    }
    ops.sort_by(|a, b| a.0.total_cmp(&b.0));
    ops
}

fn evict_pass(policy: Policy, mems: &mut [Memory], now: f64, day: u32, weights: &RetentionWeights, retention: &Retention) {
    let stored: Vec<usize> = (0..mems.len()).filter(|&i| mems[i].stored && mems[i].created <= now).collect();
    match policy {
        Policy::Ttl30 => {
            for i in stored {
                if now - mems[i].created > 30.0 * 24.0 {
                    mems[i].stored = false;
                }
            }
        }
        Policy::ImportanceUnused => {
            for i in stored {
                if mems[i].importance < 0.7 && now - mems[i].last_use > 30.0 * 24.0 {
                    mems[i].stored = false;
                }
            }
        }
        Policy::Lru | Policy::Lfu => {
            if stored.len() > CAPACITY {
                let mut order = stored.clone();
                if policy == Policy::Lru {
                    order.sort_by(|&a, &b| mems[a].last_use.total_cmp(&mems[b].last_use));
                } else {
                    order.sort_by(|&a, &b| mems[a].uses.cmp(&mems[b].uses).then(mems[a].last_use.total_cmp(&mems[b].last_use)));
                }
                for &i in &order[..stored.len() - CAPACITY] {
                    mems[i].stored = false;
                }
            }
        }
        Policy::Hybrid => {
            let rows: Vec<Keepable> = stored
                .iter()
                .map(|&i| Keepable {
                    id: i as i64,
                    protected: mems[i].protected,
                    score: weights.score(mems[i].importance, now - mems[i].last_use, mems[i].uses as f64),
                })
                .collect();
            for id in select_evictions(&rows, CAPACITY) {
                mems[id as usize].stored = false;
            }
        }
        Policy::Product => {
            // memory_forget: expire by retention, age hit counts on schedule, evict by score.
            for &i in &stored {
                let m = &mems[i];
                if let Some(min) = retention.minutes(m.semantic, m.importance, m.protected) {
                    if now - m.created >= min as f64 / 60.0 {
                        mems[i].stored = false;
                    }
                }
            }
            if day > 0 && day.is_multiple_of(7) {
                for m in mems.iter_mut() {
                    m.hits = halve_hits(m.hits);
                }
            }
            let rows: Vec<Keepable> = (0..mems.len())
                .filter(|&i| mems[i].stored && mems[i].created <= now)
                .map(|i| Keepable {
                    id: i as i64,
                    protected: mems[i].protected,
                    score: weights.score(mems[i].importance, now - mems[i].last_hit, mems[i].hits as f64),
                })
                .collect();
            for id in select_evictions(&rows, CAPACITY) {
                mems[id as usize].stored = false;
            }
        }
    }
}

fn simulate(stream: Stream, policy: Policy, seed: u64) -> Outcome {
    let weights = RetentionWeights::default();
    let retention = Retention::default();
    let mut rng = Rng(seed);
    let mut mems = memories(&mut rng);
    let mut ops_rng = Rng(seed ^ 0x5eed);
    let mut out = Outcome { questions: 0, hits: 0, rows_end: 0, rows_max: 0, hard_kept: 0 };
    for day in 0..DAYS {
        for (t, op) in day_ops(stream, day, &mems, &mut ops_rng) {
            match op {
                Op::Ask(i) => {
                    out.questions += 1;
                    if mems[i].stored {
                        out.hits += 1;
                        let m = &mut mems[i];
                        m.last_hit = t;
                        m.hits += 1;
                        m.last_use = t;
                        m.uses += 1;
                    }
                }
                Op::Scan => {
                    // A bulk read: recall with touch => false; only a cache-like policy sees it.
                    let stored: Vec<usize> = (0..mems.len()).filter(|&i| mems[i].stored && mems[i].created <= t).collect();
                    for _ in 0..SCAN_ROWS.min(stored.len()) {
                        let i = stored[(ops_rng.next_u64() % stored.len() as u64) as usize];
                        mems[i].last_use = t;
                        mems[i].uses += 1;
                    }
                }
            }
        }
        let end = (day + 1) as f64 * 24.0;
        evict_pass(policy, &mut mems, end, day + 1, &weights, &retention);
        let rows = mems.iter().filter(|m| m.stored && m.created <= end).count();
        out.rows_max = out.rows_max.max(rows);
    }
    out.rows_end = mems.iter().filter(|m| m.stored).count();
    out.hard_kept = mems.iter().filter(|m| m.stored && m.kind == Kind::Hard).count();
    out
}

fn main() {
    let seed: u64 = std::env::var("BENCH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(20261130);
    let streams = [(Stream::Dialogue, "dialogue"), (Stream::Scans, "27% scans"), (Stream::Shift, "hot-spot shift")];
    let policies = [Policy::Ttl30, Policy::Lru, Policy::Lfu, Policy::ImportanceUnused, Policy::Hybrid, Policy::Product];
    println!("Eviction simulation: {} memories over {DAYS} days ({HARD} hard facts, {PREFS} phase preferences, {ONE_OFFS} one-off items), capacity {CAPACITY}, seed {seed}", HARD + PREFS + ONE_OFFS);
    let mut rows = Vec::new();
    let mut results = Vec::new();
    for &p in &policies {
        let outs: Vec<Outcome> = streams.iter().map(|&(s, _)| simulate(s, p, seed)).collect();
        let pct = |o: &Outcome| format!("{:.1}%", 100.0 * o.hits as f64 / o.questions.max(1) as f64);
        let mut row = vec![p.name().to_string()];
        row.push(outs.iter().map(pct).collect::<Vec<_>>().join(" / "));
        row.push(outs.iter().map(|o| format!("{} (max {})", o.rows_end, o.rows_max)).collect::<Vec<_>>().join(" / "));
        row.push(outs.iter().map(|o| format!("{}/{HARD}", o.hard_kept)).collect::<Vec<_>>().join(" / "));
        row.push(if outs.iter().all(|o| o.rows_max <= CAPACITY) { "yes".into() } else { "no".into() });
        rows.push(row);
        results.push((p, outs));
    }
    let header =
        ["policy", "hit rate (dialogue / scans / shift)", "rows kept at day 90 (max after a pass)", "hard facts kept", "within capacity"];
    let text = agent_memory_bench::table(&header, &rows);

    // The targets: this product keeps every hard fact, stays within capacity, and beats every
    // other policy that also stays within capacity, in every stream.
    let product = &results.iter().find(|(p, _)| *p == Policy::Product).unwrap().1;
    let rate = |o: &Outcome| o.hits as f64 / o.questions.max(1) as f64;
    let mut ok = true;
    for (s, o) in product.iter().enumerate() {
        if o.hard_kept != HARD || o.rows_max > CAPACITY {
            ok = false;
        }
        for (p, outs) in &results {
            if *p != Policy::Product && outs[s].rows_max <= CAPACITY && rate(&outs[s]) >= rate(o) {
                println!("not met: {} ({}) >= agent_memory in stream {}", p.name(), rate(&outs[s]), streams[s].1);
                ok = false;
            }
        }
    }
    println!(
        "targets (60/60 hard facts, within capacity, best hit rate among policies within capacity, every stream): {}",
        if ok { "met" } else { "NOT met" }
    );
    if let Ok(path) = std::env::var("BENCH_OUT") {
        let _ = std::fs::write(path, format!("{text}\ntargets: {}\n", if ok { "met" } else { "NOT met" }));
    }
}
