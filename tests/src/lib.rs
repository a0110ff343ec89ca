//! Helpers for the out-of-process tests: connections to the test server that `scripts/test.sh`
//! starts (socket folder in `AGENT_MEMORY_TEST_HOST`, port in `AGENT_MEMORY_TEST_PORT`), a
//! fresh database per test, and deterministic data.

use postgres::{Client, NoTls};

/// The test server's socket folder and port, from the environment `scripts/test.sh` sets.
pub fn host_port() -> (String, String) {
    let host = std::env::var("AGENT_MEMORY_TEST_HOST")
        .expect("AGENT_MEMORY_TEST_HOST is not set: run these tests through scripts/test.sh, which starts the server");
    let port = std::env::var("AGENT_MEMORY_TEST_PORT").unwrap_or_else(|_| "28836".into());
    (host, port)
}

/// Connection parameters of the test server for `user` and `dbname`.
pub fn params_as(user: &str, dbname: &str) -> String {
    let (host, port) = host_port();
    format!("host={host} port={port} user={user} dbname={dbname}")
}

fn params(dbname: &str) -> String {
    params_as("postgres", dbname)
}

/// A connection to database `dbname` of the test server.
pub fn connect(dbname: &str) -> Client {
    Client::connect(&params(dbname), NoTls).unwrap_or_else(|e| panic!("connecting to {dbname}: {e}"))
}

/// A connection to database `dbname`, or the error (for waiting on a restarting server).
pub fn try_connect(dbname: &str) -> Result<Client, postgres::Error> {
    Client::connect(&params(dbname), NoTls)
}

/// Runs `f(w, connection)` for `w` in `0..writers`, each on a connection of its own to `db`, all
/// starting together (every connection is made before any `f` runs); returns the results in
/// order of `w`.
pub fn at_once<T: Send + 'static>(db: &'static str, writers: usize, f: fn(usize, &mut Client) -> T) -> Vec<T> {
    let go = std::sync::Arc::new(std::sync::Barrier::new(writers));
    let handles: Vec<_> = (0..writers)
        .map(|w| {
            let go = go.clone();
            std::thread::spawn(move || {
                let mut c = connect(db);
                go.wait();
                f(w, &mut c)
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

/// Creates database `name` afresh with the extension installed.
pub fn fresh_db(name: &str) -> Client {
    let mut admin = connect("postgres");
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).unwrap();
    admin.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
    let mut c = connect(name);
    c.batch_execute("SET client_min_messages = warning; CREATE EXTENSION agent_memory CASCADE").unwrap();
    c
}

/// Database `name` with the extension freshly created. The database itself is kept (created
/// when missing), because a background worker stays connected to it.
pub fn worker_database(name: &str) -> Client {
    let mut admin = connect("postgres");
    if admin.query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&name]).unwrap().is_none() {
        admin.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
    }
    let mut c = connect(name);
    c.batch_execute(
        "SET client_min_messages = warning;
         DROP EXTENSION IF EXISTS agent_memory CASCADE;
         CREATE EXTENSION agent_memory CASCADE;",
    )
    .unwrap();
    c
}

/// Sets `agent_memory.*` settings server-wide (ALTER SYSTEM), as an operator would, and reloads.
pub fn alter_system(c: &mut Client, settings: &[(&str, &str)]) {
    for (name, value) in settings {
        c.batch_execute(&format!("ALTER SYSTEM SET agent_memory.{name} = '{value}'")).unwrap();
    }
    c.batch_execute("SELECT pg_reload_conf()").unwrap();
}

/// Resets `agent_memory.*` settings server-wide (ALTER SYSTEM RESET) and reloads.
pub fn reset_system(c: &mut Client, names: &[&str]) {
    for name in names {
        c.batch_execute(&format!("ALTER SYSTEM RESET agent_memory.{name}")).unwrap();
    }
    c.batch_execute("SELECT pg_reload_conf()").unwrap();
}

/// The top plan node of `EXPLAIN (ANALYZE, WAL, FORMAT JSON)` of a statement: its "WAL Records"
/// and "WAL Bytes" count what this backend wrote for it, and nothing else on the server.
pub fn explain_analyze_wal(c: &mut Client, sql: &str) -> serde_json::Value {
    let text = c
        .simple_query(&format!("EXPLAIN (ANALYZE, WAL, FORMAT JSON) {sql}"))
        .unwrap()
        .into_iter()
        .find_map(|m| match m {
            postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_string),
            _ => None,
        })
        .unwrap();
    let plan: serde_json::Value = serde_json::from_str(&text).unwrap();
    plan[0]["Plan"].clone()
}

/// A small deterministic generator (SplitMix64), so tests need no randomness crate.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [-0.5, 0.5).
    pub fn f32(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32) / ((1u64 << 24) as f32) - 0.5
    }

    pub fn vector(&mut self, dims: usize) -> Vec<f32> {
        (0..dims).map(|_| self.f32()).collect()
    }
}

/// Cosine similarity, for checking the server's ranking from the client.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum();
    let na: f64 = a.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    dot / (na * nb)
}
