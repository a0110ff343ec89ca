//! Text in, measured (`bench/run.sh embed`). Conditions: the release build preloaded on the
//! benchmark server, all-MiniLM-L6-v2 installed (scripts/setup.sh), one thread per process
//! (`agent_memory.embed_threads = 1`, the default), the eval conversations in `AGENT_MEMORY_EVAL`.
//!
//! 1. In this process, with the extension's own embedder crate: the model's load time; one short
//!    sentence at a time; the eval's turns one at a time and in batches of 32 (sorted by length).
//! 2. On the server: `memory_recall` with a question as text beside the same call with the
//!    question's vector and words (what the text costs), and a repeated question.
//! 3. Writes of text rows without an embedding: a plain INSERT that embeds each row in its write,
//!    beside the same INSERT under `agent_memory.embed_async` and the worker's embedding of those
//!    rows in batches (the worker runs in `am_bench_maintain`; `embed_batch_size` 64).
//! 4. The memory of 1 and of 8 connections that each embedded, on each path, beside an idle
//!    backend's: resident (VmRSS, which counts the model's shared pages in every process) and
//!    proportional (Pss: a page shared by n processes counts 1/n in each, so they sum to what the
//!    connections take together).

use std::time::{Duration, Instant};

use agent_memory_bench::{percentile_ms, table};
use agent_memory_embed::{EmbedError, Model, Options};
use agent_memory_tests::{connect, fresh_db, worker_database};

fn model_dir() -> std::path::PathBuf {
    let out = std::process::Command::new("pg_config").arg("--sharedir").output().expect("pg_config");
    std::path::PathBuf::from(String::from_utf8(out.stdout).unwrap().trim()).join("agent_memory/models/all-MiniLM-L6-v2")
}

fn turns() -> Vec<String> {
    let dir = std::env::var("AGENT_MEMORY_EVAL").unwrap_or_else(|_| "../shared/eval/conversations".into());
    let mut out = Vec::new();
    for i in 1..=5 {
        let Ok(text) = std::fs::read_to_string(format!("{dir}/conversation-{i}.json")) else { continue };
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        out.extend(v["turns"].as_array().unwrap().iter().map(|t| t["text"].as_str().unwrap().to_string()));
    }
    out
}

/// Turns of the LongMemEval histories of 200 word pieces or more (their long answers), at most
/// 96, counted by `model`.
fn long_texts(model: &Model) -> Vec<String> {
    let dir = std::env::var("AGENT_MEMORY_EVAL").unwrap_or_else(|_| "../shared/eval/conversations".into());
    let dir = std::path::Path::new(&dir).join("../longmemeval");
    let mut files: Vec<_> = std::fs::read_dir(&dir).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default();
    files.sort();
    let mut out = Vec::new();
    for f in files.iter().filter(|f| f.extension().is_some_and(|e| e == "json")) {
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
        out.extend(
            v["turns"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["text"].as_str().unwrap().to_string())
                .filter(|t| model.tokens(t).unwrap() >= 200),
        );
        if out.len() >= 96 {
            break;
        }
    }
    out.truncate(96);
    out
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

/// A process's resident and proportional set sizes, in kB (`/proc/<pid>/smaps_rollup`).
fn memory_kb(pid: i32) -> (i64, i64) {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    let field = |name: &str| {
        rollup.lines().find(|l| l.starts_with(name)).and_then(|l| l.split_whitespace().nth(1)).and_then(|n| n.parse().ok()).unwrap_or(-1)
    };
    (field("Rss:"), field("Pss:"))
}

fn main() {
    // The pool the f32 products share out over when a model runs on two threads (one thread runs
    // on the caller alone).
    std::env::set_var("RAYON_NUM_THREADS", "2");
    let mut out = String::from("## Text in: embedding inside the server\n\n");
    let none = || Ok::<(), EmbedError>(());

    // 1. The embedder in this process: the exact path (f32) and the fast one (8 bits, on the
    // kernel this CPU runs; none without AVX2), side by side in the same run.
    let sentence = "The user said she moved to Lisbon last spring and prefers neovim as her editor now";
    let turns = turns();
    let sample: Vec<&str> = turns.iter().take(320).map(String::as_str).collect();
    // Word pieces are counted once, by the exact model (both paths read the same pieces).
    let counter = Model::load(&model_dir(), Options::default()).expect("the model (scripts/setup.sh installs it)");
    let avg_pieces = sample.iter().map(|t| counter.tokens(t).unwrap()).sum::<usize>() as f64 / sample.len().max(1) as f64;
    let long = long_texts(&counter);
    let long: Vec<&str> = long.iter().map(String::as_str).collect();
    let mut paths: Vec<(String, Option<agent_memory_embed::q8::Kernel>)> = vec![("exact (f32)".into(), None)];
    if let Some(k) = agent_memory_embed::q8::Kernel::fast() {
        paths.push((format!("fast (8 bits, {})", k.name()), Some(k)));
    }
    let mut rows: Vec<Vec<String>> = vec![
        vec!["model load".into()],
        vec![String::new()],
        vec![format!("{} eval turns one at a time", sample.len())],
        vec![format!("the same turns in batches (at most {} texts), one thread", agent_memory_embed::BATCH)],
        vec!["the same, two threads".into()],
        vec![format!("{} long texts (≥ 200 word pieces, LongMemEval turns) in batches", long.len())],
    ];
    let per_s = |n: usize, d: Duration| format!("{:.0}/s", n as f64 / d.as_secs_f64());
    for (_, kernel) in &paths {
        let t = Instant::now();
        let model =
            Model::load(&model_dir(), Options { kernel: *kernel, ..Options::default() }).expect("the model (scripts/setup.sh installs it)");
        rows[0].push(format!("{} ms", ms(t.elapsed())));
        let pieces = model.tokens(sentence).unwrap();
        model.embed(&[sentence], none).unwrap();
        let mut one: Vec<Duration> = (0..100)
            .map(|_| {
                let t = Instant::now();
                model.embed(&[sentence], none).unwrap();
                t.elapsed()
            })
            .collect();
        one.sort();
        rows[1][0] = format!("one sentence of {pieces} word pieces, p50 / p95");
        rows[1].push(format!("{:.2} / {:.2} ms", percentile_ms(&one, 0.5), percentile_ms(&one, 0.95)));
        let t = Instant::now();
        for s in &sample {
            model.embed(&[*s], none).unwrap();
        }
        rows[2].push(per_s(sample.len(), t.elapsed()));
        let t = Instant::now();
        model.embed(&sample, none).unwrap();
        rows[3].push(per_s(sample.len(), t.elapsed()));
        let two = Model::load(&model_dir(), Options { kernel: *kernel, threads: 2, ..Options::default() }).unwrap();
        let t = Instant::now();
        two.embed(&sample, none).unwrap();
        rows[4].push(per_s(sample.len(), t.elapsed()));
        let t = Instant::now();
        model.embed(&long, none).unwrap();
        rows[5].push(format!("{:.1}/s", long.len() as f64 / t.elapsed().as_secs_f64()));
    }
    out += &format!("In one process (the embedder crate; eval turns: mean {avg_pieces:.0} word pieces):\n\n");
    let mut header = vec!["what"];
    header.extend(paths.iter().map(|(n, _)| n.as_str()));
    out += &table(&header, &rows);
    out += "\n";

    // 2. On the server.
    let mut c = fresh_db("am_bench_embed");
    c.batch_execute("SET client_min_messages = warning").unwrap();
    let facts: Vec<serde_json::Value> = turns.iter().take(400).map(|t| serde_json::json!({"content": t, "kind": "episodic"})).collect();
    let t = Instant::now();
    c.query(
        "SELECT * FROM agent_memory.memory_reconcile_batch('bench-user', $1::text::jsonb)",
        &[&serde_json::Value::Array(facts).to_string()],
    )
    .unwrap();
    let write = t.elapsed();
    let questions =
        ["what did she say about the support group?", "when is the next trip?", "which books does he like?", "how is the new job going?"];
    c.query("SELECT count(*) FROM agent_memory.memory_recall('bench-user', 'warm up', 5, touch => false)", &[]).unwrap();
    let (mut text, mut vector, mut repeated) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..10 {
        for q in questions {
            let fresh = format!("{q} ({round})");
            // The text first: a question not seen before, so the server embeds it (the vector of
            // the baseline is then read back from the cache).
            let t = Instant::now();
            c.query("SELECT id FROM agent_memory.memory_recall('bench-user', $1::text, 10, touch => false)", &[&fresh]).unwrap();
            text.push(t.elapsed());
            let emb: pgvector::Vector = c.query_one("SELECT agent_memory.memory_embed($1)", &[&fresh]).unwrap().get(0);
            let t = Instant::now();
            c.query(
                "SELECT id FROM agent_memory.memory_recall('bench-user', $1::vector, 10, model => 'all-MiniLM-L6-v2', query_text => $2, touch => false)",
                &[&emb, &fresh],
            )
            .unwrap();
            vector.push(t.elapsed());
            let t = Instant::now();
            c.query("SELECT id FROM agent_memory.memory_recall('bench-user', $1::text, 10, touch => false)", &[&q]).unwrap();
            repeated.push(t.elapsed());
        }
    }
    // The same new questions under the fast path (a superuser's setting).
    let mut fast_text = Vec::new();
    c.batch_execute("SET agent_memory.embed_precision = fast").unwrap();
    for round in 0..10 {
        for q in questions {
            let fresh = format!("{q} (fast {round})");
            let t = Instant::now();
            c.query("SELECT id FROM agent_memory.memory_recall('bench-user', $1::text, 10, touch => false)", &[&fresh]).unwrap();
            fast_text.push(t.elapsed());
        }
    }
    c.batch_execute("RESET agent_memory.embed_precision").unwrap();
    for v in [&mut text, &mut vector, &mut repeated, &mut fast_text] {
        v.sort();
    }
    out += &format!(
        "On the server ({} memories of one user written as text in one batch: {} ms, {:.1} ms a memory):\n\n",
        400,
        ms(write),
        write.as_secs_f64() * 1000.0 / 400.0
    );
    out += &table(
        &["memory_recall, k = 10", "p50", "p95"],
        &[
            vec![
                "question as text (embedded by the server, hybrid)".into(),
                format!("{:.2} ms", percentile_ms(&text, 0.5)),
                format!("{:.2} ms", percentile_ms(&text, 0.95)),
            ],
            vec![
                "question as text, agent_memory.embed_precision = fast".into(),
                format!("{:.2} ms", percentile_ms(&fast_text, 0.5)),
                format!("{:.2} ms", percentile_ms(&fast_text, 0.95)),
            ],
            vec![
                "the same question's vector and words (the baseline)".into(),
                format!("{:.2} ms", percentile_ms(&vector, 0.5)),
                format!("{:.2} ms", percentile_ms(&vector, 0.95)),
            ],
            vec![
                "a question asked again (its embedding from the cache)".into(),
                format!("{:.2} ms", percentile_ms(&repeated, 0.5)),
                format!("{:.2} ms", percentile_ms(&repeated, 0.95)),
            ],
        ],
    );
    out += &format!("\nWhat the text adds: {:.2} ms at p50.\n\n", percentile_ms(&text, 0.5) - percentile_ms(&vector, 0.5));

    // A cached text's cost: 10,000 calls of memory_embed on one text inside one statement (every
    // one after the first a hit of the process's cache), beside the same statement without it.
    let per_call = |sql: &str, c: &mut postgres::Client| {
        let mut best = f64::MAX;
        for _ in 0..5 {
            let t = Instant::now();
            c.query(sql, &[]).unwrap();
            best = best.min(t.elapsed().as_secs_f64() * 1000.0 / 10_000.0);
        }
        best
    };
    let cached = per_call(
        "SELECT count(agent_memory.memory_embed('the same question, asked again' || left(g::text, 0))) FROM generate_series(1, 10000) g",
        &mut c,
    );
    let bare =
        per_call("SELECT count(length('the same question, asked again' || left(g::text, 0))) FROM generate_series(1, 10000) g", &mut c);
    out += &format!(
        "A cached text: memory_embed of a text embedded before takes {:.4} ms (10,000 calls in one statement, {:.4} ms a call, less {:.4} ms for the statement without it; aim ≤ 0.05 ms).\n\n",
        cached - bare,
        cached,
        bare
    );

    // Many clients: 4 connections at once, each embedding its own 80 turns one call at a time.
    let t = Instant::now();
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let mine: Vec<String> = turns.iter().skip(1000 + i * 80).take(80).cloned().collect();
            std::thread::spawn(move || {
                let mut c = connect("am_bench_embed");
                for s in &mine {
                    c.query_one("SELECT agent_memory.memory_embed($1)", &[s]).unwrap();
                }
                mine.len()
            })
        })
        .collect();
    let done: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    let took = t.elapsed().as_secs_f64();
    out += &format!(
        "Many clients: 4 connections embedding distinct turns one call at a time, {done} turns in {took:.2} s: {:.0} turns/s over the machine's 2 cores.\n\n",
        done as f64 / took
    );

    // 3. Rows written as text: embedded by the write, or stored at once and embedded by the worker.
    let rows: Vec<String> = turns.iter().skip(2000).take(400).cloned().collect();
    let mut w = worker_database("am_bench_maintain");
    w.batch_execute("SET client_min_messages = warning").unwrap();
    // Each path writes texts of its own (a mark at the end), so neither finds the other's in the cache.
    let insert = "INSERT INTO agent_memory.memories (user_id, content, kind) SELECT $1, t || $3, 'episodic' FROM unnest($2::text[]) t";
    let t = Instant::now();
    w.execute(insert, &[&"bench-sync", &rows, &" (s)"]).unwrap();
    let sync_write = t.elapsed();
    w.batch_execute("SET agent_memory.embed_async = on").unwrap();
    let t = Instant::now();
    w.execute(insert, &[&"bench-async", &rows, &" (a)"]).unwrap();
    let async_write = t.elapsed();
    let waiting = |w: &mut postgres::Client| -> i64 {
        w.query_one("SELECT count(*) FROM agent_memory.memories WHERE user_id = 'bench-async' AND emb IS NULL", &[]).unwrap().get(0)
    };
    let t = Instant::now();
    while waiting(&mut w) > 0 && t.elapsed() < Duration::from_secs(600) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let worker = t.elapsed();
    let left = waiting(&mut w);
    let per_row = |d: Duration| format!("{:.2} ms a row", d.as_secs_f64() * 1000.0 / rows.len() as f64);
    out += &format!(
        "Writes of {} turns as text rows (one INSERT of content only):

",
        rows.len()
    );
    out += &table(
        &["path", "time", "per row"],
        &[
            vec!["embedded by the write (the baseline)".into(), format!("{} ms", ms(sync_write)), per_row(sync_write)],
            vec!["stored under embed_async (emb NULL)".into(), format!("{} ms", ms(async_write)), per_row(async_write)],
            vec![
                format!(
                    "then embedded by the worker, batches of 64{}",
                    if left > 0 { format!(" ({left} left at 600 s)") } else { String::new() }
                ),
                format!("{} ms", ms(worker)),
                format!("{:.0} rows/s", (rows.len() as i64 - left) as f64 / worker.as_secs_f64()),
            ],
        ],
    );
    out += "\n";
    drop(w);

    // 4. Memory of 1 and of 8 connections that embed at once, on each path. The connections of
    // the parts above are closed first, so that the model's pages are shared by these alone.
    drop(c);
    let idle = connect("am_bench_embed");
    let mut idle = idle;
    let idle_pid: i32 = idle.query_one("SELECT pg_backend_pid()", &[]).unwrap().get(0);
    let (idle_rss, idle_pss) = memory_kb(idle_pid);
    let mb = |kb: i64| kb as f64 / 1024.0;
    let mut mem_rows = Vec::new();
    for precision in ["exact", "fast"] {
        for n in [1usize, 8] {
            let handles: Vec<_> = (0..n)
                .map(|i| {
                    std::thread::spawn(move || {
                        let mut c = connect("am_bench_embed");
                        c.batch_execute(&format!("SET agent_memory.embed_precision = {precision}")).unwrap();
                        let pid: i32 = c.query_one("SELECT pg_backend_pid()", &[]).unwrap().get(0);
                        c.query("SELECT agent_memory.memory_embed($1)", &[&format!("connection {i} embeds a sentence ({precision})")])
                            .unwrap();
                        (c, pid)
                    })
                })
                .collect();
            let conns: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
            let mem: Vec<(i64, i64)> = conns.iter().map(|(_, pid)| memory_kb(*pid)).collect();
            let pss_total: i64 = mem.iter().map(|m| m.1).sum();
            mem_rows.push(vec![
                format!("{n} connection{} that embedded, {precision}", if n > 1 { "s" } else { "" }),
                format!("{:.0} MB", mb(mem.iter().map(|m| m.0).max().unwrap())),
                format!("{:.0} MB", mb(pss_total)),
                format!("{:.0} MB", mb(pss_total - n as i64 * idle_pss)),
            ]);
            drop(conns);
            std::thread::sleep(Duration::from_millis(300));
        }
    }
    out += &format!(
        "Memory (an idle backend: {:.0} MB resident, {:.0} MB proportional). Resident counts the model's pages, mapped from its file, in every process that touched them; the proportional sizes (a page shared by n processes counts 1/n in each) add up to what the connections take together:\n\n",
        mb(idle_rss),
        mb(idle_pss)
    );
    out += &table(&["connections", "resident, largest", "proportional, together", "above as many idle backends"], &mem_rows);
    println!("{}", out.lines().last().unwrap_or_default());
    if let Ok(path) = std::env::var("BENCH_OUT") {
        std::fs::write(path, &out).unwrap();
    }
}
