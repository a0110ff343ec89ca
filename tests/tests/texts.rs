//! Text in, as tenants and operators meet it (hardening round 3), against the real test server
//! with the real model: two writer roles bound to two tenants, an admin that is no superuser and
//! a reader. The embedding cache answers no tenant from another's texts, an erasure drops every
//! entry its user's words made, a model whose row changes is embedded again, a model's folder
//! stays under `agent_memory.model_path`, and a plain UPDATE of content embeds the new content.

use agent_memory_tests::{cosine, fresh_db, params_as};
use postgres::{Client, NoTls};

const ROLES: &str = "DO $$ BEGIN
     IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'am_txt_a') THEN CREATE ROLE am_txt_a LOGIN; END IF;
     IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'am_txt_b') THEN CREATE ROLE am_txt_b LOGIN; END IF;
     IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'am_txt_admin') THEN CREATE ROLE am_txt_admin LOGIN; END IF;
     IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'am_txt_reader') THEN CREATE ROLE am_txt_reader LOGIN; END IF;
 END $$;";

/// A fresh database with the four roles: `am_txt_a` writes for users `ta-%`, `am_txt_b` for
/// `tb-%`, `am_txt_reader` reads for `tb-%`, `am_txt_admin` administers.
fn setup(db: &str) -> Client {
    let mut c = fresh_db(db);
    c.batch_execute(ROLES).unwrap();
    c.batch_execute(
        "SELECT agent_memory.grant_access('am_txt_a', 'writer');
         SELECT agent_memory.grant_access('am_txt_b', 'writer');
         SELECT agent_memory.grant_access('am_txt_reader', 'reader');
         SELECT agent_memory.grant_access('am_txt_admin', 'admin');
         SELECT agent_memory.bind_role('am_txt_a', 'ta-%');
         SELECT agent_memory.bind_role('am_txt_b', 'tb-%');
         SELECT agent_memory.bind_role('am_txt_reader', 'tb-%');",
    )
    .unwrap();
    c
}

fn as_role(role: &str, db: &str, user: Option<&str>) -> Client {
    let mut c = Client::connect(&params_as(role, db), NoTls).unwrap();
    if let Some(u) = user {
        c.batch_execute(&format!("SET agent_memory.user_id = '{u}'")).unwrap();
    }
    c
}

fn entries(c: &mut Client) -> i64 {
    c.query_one("SELECT count(*) FROM agent_memory.embedding_cache", &[]).unwrap().get(0)
}

fn embed(c: &mut Client, text: &str) -> Vec<f32> {
    let v: pgvector::Vector = c.query_one("SELECT agent_memory.memory_embed($1)", &[&text]).unwrap().get(0);
    v.to_vec()
}

fn sqlstate(e: &postgres::Error) -> String {
    e.code().map(|c| c.code().to_string()).unwrap_or_else(|| format!("no SQLSTATE: {e}"))
}

#[test]
fn the_embedding_cache_answers_no_tenant_from_anothers_texts() {
    const DB: &str = "am_texts_cache";
    let mut su = setup(DB);
    let secret = "Ana was diagnosed with asthma in March of last year";
    let mut a = as_role("am_txt_a", DB, Some("ta-1"));
    a.query("SELECT action FROM agent_memory.memory_reconcile('ta-1', NULL, NULL, NULL, $1)", &[&secret]).unwrap();
    let after_write = entries(&mut su);
    assert!(after_write >= 1, "the write's embedding is cached");

    // Tenant B asking for the exact text finds nothing of A's: the model runs, and B's own entry
    // is made (a hit would have left the count as it was).
    let mut b = as_role("am_txt_b", DB, Some("tb-1"));
    let theirs = embed(&mut b, secret);
    assert_eq!(entries(&mut su), after_write + 1, "another tenant's text is no hit");
    // Its own repeat is a hit: no new entry.
    assert_eq!(embed(&mut b, secret), theirs);
    assert_eq!(entries(&mut su), after_write + 1, "a tenant's own repeat is a hit");
    // A reader of B's tenant, and B's recall by text, answer from B's scope only as well.
    let mut reader = as_role("am_txt_reader", DB, Some("tb-1"));
    reader.query("SELECT agent_memory.memory_embed($1)", &[&"a question only the reader asked"]).unwrap();
    assert_eq!(entries(&mut su), after_write + 2);
    b.query("SELECT id FROM agent_memory.memory_recall('tb-1', $1::text, 3, touch => false)", &[&secret]).unwrap();
    assert_eq!(entries(&mut su), after_write + 2, "B's question is B's entry, already there");

    // A pooled connection of A that served ta-1 answers ta-2 from ta-2's scope: the process's own
    // recent embeddings are per user too.
    a.batch_execute("SET agent_memory.user_id = 'ta-2'").unwrap();
    embed(&mut a, secret);
    assert_eq!(entries(&mut su), after_write + 3, "the process's recent embeddings are per user");

    // A writer cannot embed in another tenant's name through the write trigger's function.
    let e = b.query("SELECT agent_memory.embed_row('ta-1', $1, NULL)", &[&secret]).unwrap_err();
    assert_eq!(sqlstate(&e), "42501", "{e}");
    // Nor the windows of a long text (agent_memory.embed_windows).
    b.batch_execute("SET agent_memory.embed_windows = 2").unwrap();
    let e = b.query("SELECT agent_memory.embed_windows('ta-1', repeat($1 || ' ', 40), 'all-MiniLM-L6-v2')", &[&secret]).unwrap_err();
    assert_eq!(sqlstate(&e), "42501", "{e}");
    let own: Option<i32> = b
        .query_one("SELECT cardinality(agent_memory.embed_windows('tb-1', repeat($1 || ' ', 40), 'all-MiniLM-L6-v2'))", &[&secret])
        .unwrap()
        .get(0);
    assert!(own.is_some_and(|n| n >= 1), "a tenant's own long text has windows");
    b.batch_execute("RESET agent_memory.embed_windows").unwrap();
    assert_eq!(entries(&mut su), after_write + 3);

    // The counters count every tenant's texts: an admin's only.
    for role in [&mut reader, &mut b] {
        let e = role.query("SELECT * FROM agent_memory.memory_embed_stats()", &[]).unwrap_err();
        assert_eq!(sqlstate(&e), "42501", "{e}");
    }
    let mut admin = as_role("am_txt_admin", DB, None);
    let n: i64 = admin.query_one("SELECT entries FROM agent_memory.memory_embed_stats()", &[]).unwrap().get(0);
    assert_eq!(n, after_write + 3);
}

#[test]
fn an_erasure_drops_every_cache_entry_the_users_words_made() {
    const DB: &str = "am_texts_erase";
    let mut su = setup(DB);
    let mut a = as_role("am_txt_a", DB, Some("ta-8"));
    a.query("SELECT action FROM agent_memory.memory_reconcile('ta-8', NULL, NULL, NULL, 'Keeps bees on the roof')", &[]).unwrap();
    let others = entries(&mut su);

    a.batch_execute("SET agent_memory.user_id = 'ta-9'").unwrap();
    let id: i64 = a
        .query_one("SELECT memory_id FROM agent_memory.memory_reconcile('ta-9', 'user', 'lives_in', 'Lisbon', 'Lives in Lisbon')", &[])
        .unwrap()
        .get(0);
    // Texts no row holds after these: a NONE (the same fact in other words, single and batch),
    // content replaced by memory_update, a purged memory, and questions.
    let none: String = a
        .query_one(
            "SELECT action FROM agent_memory.memory_reconcile('ta-9', 'user', 'lives_in', 'Lisbon', 'Has lived in Lisbon for years')",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(none, "NONE");
    a.query(
        "SELECT * FROM agent_memory.memory_reconcile_batch('ta-9', '[{\"subject\": \"user\", \"predicate\": \"lives_in\", \"object\": \"Lisbon\", \"content\": \"Calls Lisbon home\"}]'::jsonb)",
        &[],
    )
    .unwrap();
    a.query("SELECT agent_memory.memory_update($1, (SELECT version FROM agent_memory.memories WHERE id = $1), content => 'Lives in Lisbon, near the river')", &[&id]).unwrap();
    let gone: i64 = a
        .query_one("SELECT memory_id FROM agent_memory.memory_reconcile('ta-9', NULL, NULL, NULL, 'Once owned a red bicycle')", &[])
        .unwrap()
        .get(0);
    su.execute("DELETE FROM agent_memory.memories WHERE id = $1", &[&gone]).unwrap();
    a.query("SELECT id FROM agent_memory.memory_recall('ta-9', 'where does the user live?', 3, touch => false)", &[]).unwrap();
    a.query("SELECT agent_memory.memory_embed('a text the user only asked to embed')", &[]).unwrap();
    assert!(entries(&mut su) >= others + 7, "each of the user's texts made an entry: {}", entries(&mut su));

    let mut admin = as_role("am_txt_admin", DB, None);
    admin.query("SELECT * FROM agent_memory.memory_erase('ta-9')", &[]).unwrap();
    assert_eq!(entries(&mut su), others, "only the other user's entries are left");
    // The process that embedded them no longer answers them either: its recent embeddings were
    // dropped, so the same text makes a new entry.
    a.query("SELECT agent_memory.memory_embed('a text the user only asked to embed')", &[]).unwrap();
    assert_eq!(entries(&mut su), others + 1);
}

#[test]
fn a_model_whose_row_changes_is_embedded_again() {
    const DB: &str = "am_texts_model_row";
    let mut su = setup(DB);
    let text = "The committee met on Tuesday to discuss the budget for the new library, the repairs to the \
                old bridge, the schedule of the summer festival and the hiring of two more teachers";
    let full = embed(&mut su, text);
    su.batch_execute("UPDATE agent_memory.embedding_models SET max_tokens = 6 WHERE name = 'all-MiniLM-L6-v2'").unwrap();
    let short = embed(&mut su, text);
    assert!(cosine(&full, &short) < 0.95, "a cut at 6 pieces reads another text: {}", cosine(&full, &short));
    let mut other = Client::connect(&params_as("postgres", DB), NoTls).unwrap();
    assert!(cosine(&embed(&mut other, text), &short) > 0.99999, "another process sees the change too");
    su.batch_execute("UPDATE agent_memory.embedding_models SET max_tokens = 256 WHERE name = 'all-MiniLM-L6-v2'").unwrap();
    assert!(cosine(&embed(&mut su, text), &full) > 0.99999);
}

#[test]
fn a_model_folder_stays_under_the_models_folder() {
    const DB: &str = "am_texts_folder";
    let mut su = setup(DB);
    let mut admin = as_role("am_txt_admin", DB, None);
    for (i, folder) in ["/etc", "../../..", "all-MiniLM-L6-v2/../../../.."].iter().enumerate() {
        let name = format!("elsewhere-{i}");
        admin
            .execute("INSERT INTO agent_memory.embedding_models (name, dimensions, folder) VALUES ($1, 384, $2)", &[&name, folder])
            .unwrap();
        let e = admin.query("SELECT agent_memory.memory_embed('hello', $1)", &[&name]).unwrap_err();
        assert_eq!(sqlstate(&e), "42501", "{folder}: {e}");
    }
    // A superuser may allow it: the folder is then read (and has no model's files).
    su.batch_execute("SET agent_memory.model_folders_anywhere = on").unwrap();
    let e = su.query("SELECT agent_memory.memory_embed('hello', 'elsewhere-0')", &[]).unwrap_err();
    assert_eq!(sqlstate(&e), "58P01", "{e}");
    let e = admin.batch_execute("SET agent_memory.model_folders_anywhere = on").unwrap_err();
    assert_eq!(sqlstate(&e), "42501", "{e}");
    // The installed model, under the folder, still embeds.
    assert_eq!(embed(&mut admin, "hello").len(), 384);
}

#[test]
fn a_plain_update_of_content_embeds_the_new_content() {
    const DB: &str = "am_texts_update";
    let mut su = setup(DB);
    let mut a = as_role("am_txt_a", DB, Some("ta-3"));
    let id: i64 = a
        .query_one("SELECT memory_id FROM agent_memory.memory_reconcile('ta-3', NULL, NULL, NULL, 'Plays the cello on Sundays')", &[])
        .unwrap()
        .get(0);
    a.execute("UPDATE agent_memory.memories SET content = 'Repairs old clocks in a workshop' WHERE id = $1", &[&id]).unwrap();
    let stored: pgvector::Vector = su.query_one("SELECT emb FROM agent_memory.memories WHERE id = $1", &[&id]).unwrap().get(0);
    let fresh = embed(&mut su, "Repairs old clocks in a workshop");
    assert!(cosine(&stored.to_vec(), &fresh) > 0.99999, "the stored embedding is the new content's");
    // An UPDATE that gives its own embedding keeps it; one of another model's vectors too.
    su.batch_execute(
        "INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model) VALUES ('ta-3', 'outside', '[1,0,0]', 'outside-3d');
         UPDATE agent_memory.memories SET content = 'outside, renamed' WHERE embedding_model = 'outside-3d';",
    )
    .unwrap();
    let kept: pgvector::Vector =
        su.query_one("SELECT emb FROM agent_memory.memories WHERE embedding_model = 'outside-3d'", &[]).unwrap().get(0);
    assert_eq!(kept.to_vec(), vec![1.0, 0.0, 0.0]);
}

/// The peak resident memory of a server process, in kB (from /proc: the tests run beside the
/// server).
fn peak_kb(c: &mut Client) -> i64 {
    let pid: i32 = c.query_one("SELECT pg_backend_pid()", &[]).unwrap().get(0);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// About `bytes` of prose, different for each `seed`.
fn prose(seed: usize, bytes: usize) -> String {
    let words = ["river", "lantern", "orchard", "harbour", "violin", "meadow", "copper", "winter", "letter", "garden"];
    let mut s = String::with_capacity(bytes + 16);
    let mut i = seed;
    while s.len() < bytes {
        s.push_str(words[i % words.len()]);
        s.push_str(if i.is_multiple_of(13) { ". " } else { " " });
        i = i.wrapping_mul(31).wrapping_add(7 + seed);
    }
    s
}

#[test]
fn a_long_text_costs_no_more_than_its_start() {
    const DB: &str = "am_texts_long";
    let _su = setup(DB);
    let mut reader = as_role("am_txt_reader", DB, Some("tb-1"));
    let before = peak_kb(&mut reader);
    // 15 texts of 1 MB each in one call: each is read as far as the model reads it.
    let texts: Vec<String> = (0..15).map(|i| prose(i, 1_000_000)).collect();
    let rows = reader.query("SELECT ordinal, embedding FROM agent_memory.memory_embed($1::text[])", &[&texts]).unwrap();
    assert_eq!(rows.len(), 15);
    let grown_mb = (peak_kb(&mut reader) - before) / 1024;
    assert!(grown_mb < 300, "15 MB of text took {grown_mb} MB more of the process's memory");
    // The same as the text's first 8 KB: the model reads 256 pieces.
    let whole: pgvector::Vector = rows[3].get(1);
    let start: String = texts[3].chars().take(8192).collect();
    let start = &start[..start.rfind(' ').unwrap()];
    assert!(cosine(&whole.to_vec(), &embed(&mut reader, start)) > 0.99999);
}

#[test]
fn a_call_past_the_bytes_the_model_may_read_is_refused() {
    const DB: &str = "am_texts_bound";
    let mut su = setup(DB);
    let mut reader = as_role("am_txt_reader", DB, Some("tb-1"));
    // 300 texts of 16 KB: 4.8 MB that the model would read, past the default 4 MB.
    let texts: Vec<String> = (0..300).map(|i| prose(i, 16_000)).collect();
    let e = reader.query("SELECT count(*) FROM agent_memory.memory_embed($1::text[])", &[&texts]).unwrap_err();
    assert_eq!(sqlstate(&e), "54000", "{e}");
    let db = e.as_db_error().unwrap();
    assert!(db.hint().unwrap_or_default().contains("agent_memory.embed_max_bytes"), "{db:?}");
    assert!(db.message().len() < 300, "the error does not echo the input");
    // Only a superuser raises it.
    let e = reader.batch_execute("SET agent_memory.embed_max_bytes = 100000000").unwrap_err();
    assert_eq!(sqlstate(&e), "42501", "{e}");
    // Long texts count only as far as the model reads them: 300 texts of 1 MB read 16 KB each
    // would be refused too, and 100 of them are not.
    let long: Vec<String> = (0..100).map(|i| prose(i, 1_000_000)).collect();
    su.batch_execute("SET statement_timeout = '1s'").unwrap();
    let e = su.query("SELECT count(*) FROM agent_memory.memory_embed($1::text[])", &[&long]).unwrap_err();
    assert_eq!(sqlstate(&e), "57014", "accepted, then stopped by the timeout: {e}");
}

#[test]
fn a_cancel_stops_a_long_embedding_within_a_second_or_so() {
    const DB: &str = "am_texts_cancel";
    let mut su = setup(DB);
    let texts: Vec<String> = (0..200).map(|i| prose(i, 10_000)).collect();
    su.batch_execute("SET statement_timeout = '1s'").unwrap();
    let started = std::time::Instant::now();
    let e = su.query("SELECT count(*) FROM agent_memory.memory_embed($1::text[])", &[&texts]).unwrap_err();
    let took = started.elapsed();
    assert_eq!(sqlstate(&e), "57014", "{e}");
    // Generous against a noisy machine (a chunk of 1,024 pieces runs in under a second on an idle
    // core): the whole call takes about a minute.
    assert!(took < std::time::Duration::from_secs(6), "stopped {took:?} after it started, with a 1 s timeout");
}

#[test]
fn a_bound_writer_claims_no_model_name_for_the_other_tenants() {
    const DB: &str = "am_texts_models";
    let mut su = setup(DB);
    let mut b = as_role("am_txt_b", DB, Some("tb-1"));
    // Writing with a model nobody registered would register it with this dimension for everyone.
    for sql in [
        "INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model) VALUES ('tb-1', 'x', '[1,2,3]', 'text-embedding-3-small')",
        "SELECT * FROM agent_memory.memory_reconcile('tb-1', NULL, NULL, NULL, 'x', '[1,2,3]'::vector, model => 'text-embedding-3-small')",
        "SELECT agent_memory.register_model('text-embedding-3-small', 3)",
    ] {
        let e = b.batch_execute(sql).unwrap_err();
        assert_eq!(sqlstate(&e), "42501", "{sql}: {e}");
    }
    b.batch_execute("SET ROLE am_txt_b").unwrap();
    let e = b.batch_execute("SELECT agent_memory.register_model('text-embedding-3-small', 3)").unwrap_err();
    assert_eq!(sqlstate(&e), "42501", "{e}");
    let n: i64 =
        su.query_one("SELECT count(*) FROM agent_memory.embedding_models WHERE name = 'text-embedding-3-small'", &[]).unwrap().get(0);
    assert_eq!(n, 0, "the name is still free");
    // An admin registers it; then the bound writer writes with it.
    let mut admin = as_role("am_txt_admin", DB, None);
    admin.batch_execute("SELECT agent_memory.register_model('text-embedding-3-small', 1536)").unwrap();
    let e = b
        .batch_execute("INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model) VALUES ('tb-1', 'x', '[1,2,3]', 'text-embedding-3-small')")
        .unwrap_err();
    assert_eq!(sqlstate(&e), "22000", "the registered dimension holds: {e}");
    // A writer bound to no user acts for every user, and registers a model by writing with it.
    su.batch_execute(
        "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'am_txt_free') THEN CREATE ROLE am_txt_free LOGIN; END IF; END $$;
         SELECT agent_memory.grant_access('am_txt_free', 'writer');",
    )
    .unwrap();
    let mut free = as_role("am_txt_free", DB, Some("tc-1"));
    free.batch_execute("INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model) VALUES ('tc-1', 'y', '[1,2]', 'two-d')")
        .unwrap();
}

#[test]
fn without_a_worker_the_cache_keeps_to_its_size() {
    const DB: &str = "am_texts_trim";
    let mut su = setup(DB);
    agent_memory_tests::alter_system(&mut su, &[("embed_cache_size", "100")]);
    // The reload reaches this session a moment later.
    let started = std::time::Instant::now();
    while su.query_one("SELECT current_setting('agent_memory.embed_cache_size')", &[]).unwrap().get::<_, String>(0) != "100" {
        assert!(started.elapsed() < std::time::Duration::from_secs(30), "the reload did not reach the session");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let texts: Vec<String> = (0..1100).map(|i| format!("note {i} about a small thing")).collect();
    let n: i64 = su.query_one("SELECT count(*) FROM agent_memory.memory_embed($1::text[])", &[&texts]).unwrap().get(0);
    assert_eq!(n, 1100);
    let left = entries(&mut su);
    agent_memory_tests::reset_system(&mut su, &["embed_cache_size"]);
    assert!(left <= 100, "{left} entries kept past a size of 100, with no worker in this database");
}

#[test]
fn an_error_never_echoes_a_megabyte_of_its_input() {
    const DB: &str = "am_texts_echo";
    let mut su = setup(DB);
    let big = "r".repeat(1_000_000);
    let e = su.query("SELECT agent_memory.memory_record_turn('tb-1', 's', $1, 'hello')", &[&big]).unwrap_err();
    let db = e.as_db_error().unwrap();
    assert_eq!(db.code().code(), "22023");
    assert!(db.message().len() <= 1000, "a message of {} bytes", db.message().len());
    assert!(db.message().contains("bytes in all"), "{}", &db.message()[..100]);
    // Empty content is no memory, on every path.
    let e = su.query("SELECT * FROM agent_memory.memory_reconcile('tb-1', NULL, NULL, NULL, '   ')", &[]).unwrap_err();
    assert_eq!(sqlstate(&e), "22023", "{e}");
    let e = su.execute("INSERT INTO agent_memory.memories (user_id, content) VALUES ('tb-1', '')", &[]).unwrap_err();
    assert_eq!(sqlstate(&e), "22023", "{e}");
    // Metadata past agent_memory.max_metadata_bytes is refused on a direct write too.
    let e = su
        .execute(
            "INSERT INTO agent_memory.memories (user_id, content, metadata) VALUES ('tb-1', 'a note', jsonb_build_object('blob', repeat('x', 100000)))",
            &[],
        )
        .unwrap_err();
    assert_eq!(sqlstate(&e), "54000", "{e}");
}

#[test]
fn an_application_role_imports_through_a_temporary_table() {
    const DB: &str = "am_texts_copy";
    let _su = setup(DB);
    let mut a = as_role("am_txt_a", DB, Some("ta-5"));
    // PostgreSQL refuses COPY FROM into a table under row-level security (0A000) ...
    let e = a.copy_in("COPY agent_memory.memories (user_id, content) FROM STDIN").err();
    let e = e.expect("COPY FROM is refused under row-level security");
    assert_eq!(sqlstate(&e), "0A000", "{e}");
    // ... so the README's import goes through a temporary table, row by row under the policies.
    let mut a = as_role("am_txt_a", DB, Some("ta-5"));
    a.batch_execute("CREATE TEMP TABLE m (user_id text, content text)").unwrap();
    let mut w = a.copy_in("COPY m FROM STDIN").unwrap();
    use std::io::Write;
    writeln!(w, "ta-5\tKeeps a logbook of every walk").unwrap();
    writeln!(w, "ta-5\tPrefers trains to planes").unwrap();
    w.finish().unwrap();
    let n = a.execute("INSERT INTO agent_memory.memories (user_id, content) SELECT user_id, content FROM m", &[]).unwrap();
    assert_eq!(n, 2);
    let e = a.execute("INSERT INTO agent_memory.memories (user_id, content) VALUES ('tb-1', 'not mine')", &[]).unwrap_err();
    assert_eq!(sqlstate(&e), "42501", "another tenant's row is refused: {e}");
}

#[test]
fn the_extension_needs_a_database_in_utf8() {
    let mut admin = agent_memory_tests::connect("postgres");
    admin.batch_execute("DROP DATABASE IF EXISTS am_texts_ascii").unwrap();
    admin.batch_execute("CREATE DATABASE am_texts_ascii ENCODING 'SQL_ASCII' TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C'").unwrap();
    let mut c = agent_memory_tests::connect("am_texts_ascii");
    let e = c.batch_execute("SET client_min_messages = warning; CREATE EXTENSION agent_memory CASCADE").unwrap_err();
    assert_eq!(sqlstate(&e), "0A000", "{e}");
    assert!(e.as_db_error().unwrap().hint().unwrap_or_default().contains("UTF8"));
    drop(c);
    admin.batch_execute("DROP DATABASE am_texts_ascii WITH (FORCE)").unwrap();
}

/// `agent_memory.embed_precision = fast` runs the linear layers in 8 bits where the CPU has AVX2:
/// its vectors stay within parity of the exact ones, they are cached apart from them (a text
/// embedded both ways has two entries, and neither answers for the other), and only a superuser
/// chooses it.
#[test]
fn the_fast_precision_stays_within_parity_and_apart_from_the_exact_vectors() {
    const DB: &str = "am_texts_precision";
    let mut su = setup(DB);
    let text = "Priya switched her team from Jenkins to GitHub Actions after the outage in May";
    let exact = embed(&mut su, text);
    let after_exact = entries(&mut su);
    su.batch_execute("SET agent_memory.embed_precision = fast").unwrap();
    let fast = embed(&mut su, text);
    let c = cosine(&exact, &fast);
    assert!(c >= 0.999, "fast against exact: cosine {c}");
    #[cfg(target_arch = "x86_64")]
    let has_kernel = std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma");
    #[cfg(not(target_arch = "x86_64"))]
    let has_kernel = false;
    if has_kernel {
        assert_ne!(exact, fast, "the 8-bit path ran (this CPU has AVX2)");
        assert_eq!(entries(&mut su), after_exact + 1, "the fast vector is an entry of its own");
    } else {
        assert_eq!(exact, fast, "without AVX2, fast is exact");
    }
    // Each way answers from its own entry, in another process too.
    let mut other = Client::connect(&params_as("postgres", DB), NoTls).unwrap();
    assert_eq!(embed(&mut other, text), exact);
    other.batch_execute("SET agent_memory.embed_precision = fast").unwrap();
    assert_eq!(embed(&mut other, text), fast);
    // A writer cannot choose it: it changes what the server stores for every tenant.
    let mut writer = as_role("am_txt_a", DB, Some("ta-1"));
    let e = writer.batch_execute("SET agent_memory.embed_precision = fast").unwrap_err();
    assert_eq!(sqlstate(&e), "42501", "{e}");
}
