//! Every SQL statement the extension runs on a per-user table names its user.
//!
//! Sharded by user (Citus), a statement that finds rows by `id` or `ctid` alone runs against
//! every shard: a `ctid` taken from one user's shard then matches *other* users' rows there, and
//! a by-id read fans out to every node. On one server such a statement is merely slower than it
//! need be. So every statement over `memories`, `turns`, `tasks`, `predicate_declarations` and the
//! three pack tables carries a `user_id` predicate on each of those tables it reads or changes
//! (an INSERT lists `user_id` among its columns); the passes over every user (forgetting,
//! consolidation, the workers' embedding, packing and hit-fold passes) are listed below, each with
//! its reason.
//!
//! This test reads the SQL texts where the extension keeps them: the string literals of `src/`
//! (a constant's name names its text) and the statements of `sql/schema.sql` and
//! `sql/access.sql` (named by the function they are in). It needs no server.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use regex::Regex;

/// The tables that hold one user's rows, each keyed by `user_id` first.
const PER_USER: &[&str] =
    &["memories", "turns", "tasks", "predicate_declarations", "memory_packs", "memory_pack_users", "memory_pack_stale"];

/// Statements that go over every user's rows on purpose, with why. A name is a constant of
/// `src/` (`file.rs::NAME`) or a function of the SQL files (`file.sql::function`).
const CROSS_USER: &[(&str, &str)] = &[
    // Forgetting (memory_forget and the worker): expiry, eviction, the archive's capacity, the
    // purges and the halving of hit counts go over every user's rows, a batch at a time, and
    // find the rows of a batch again by their place (ctid) in the same transaction.
    ("forget.rs::EXPIRE_BATCH", "forgetting's expiry: every user's memories past their end"),
    ("forget.rs::EXPIRE_COUNT", "forgetting's dry run: how many memories of every user expire"),
    ("forget.rs::PURGE_TURNS_BATCH", "forgetting's purge of every user's turns older than the retention"),
    ("forget.rs::PURGE_TURNS_COUNT", "forgetting's dry run of the turn purge"),
    ("forget.rs::HALVE_BATCH", "forgetting halves every user's hit counts"),
    ("forget.rs::HALVE_COUNT", "forgetting's dry run of the halving"),
    ("forget.rs::OVER_CAPACITY", "forgetting finds the users above the capacity"),
    ("forget.rs::OVER_CAPACITY_MODELS", "forgetting finds the users above the capacity, with their models"),
    ("forget.rs::PURGE_LOCK_USERS", "forgetting finds the users and models of the next purge batch"),
    ("forget.rs::PURGE_COUNT", "forgetting's dry run of the purge"),
    ("forget.rs::EVICT_ROWS", "eviction retires the rows its ranking chose, of every user over the capacity, by place"),
    ("forget.rs::ARCHIVE_OVER_FIND", "forgetting finds every user's archived memories over the archive's capacity"),
    ("forget.rs::ARCHIVE_RETIRE_ROWS", "forgetting retires the archived rows it found, by place"),
    ("forget.rs::ARCHIVE_OVER_COUNT", "forgetting's dry run of the archive's capacity"),
    // Consolidation (memory_consolidate and the worker) goes over every user's memories.
    ("consolidate.rs::USERS_AND_MODELS", "consolidation finds every user and model with active memories"),
    ("consolidate.rs::DUPLICATE_GROUPS", "consolidation groups every user's duplicate facts (grouped by user)"),
    ("consolidate.rs::MERGE_BATCH", "consolidation merges the duplicates it grouped, by id"),
    ("consolidate.rs::SUMMARY_GROUPS", "consolidation groups every user's old episodes (grouped by user)"),
    ("consolidate.rs::SUMMARY_SOURCES", "consolidation reads and locks the episodes of a group, by id"),
    ("consolidate.rs::ARCHIVE_EVIDENCE", "consolidation archives a summary's evidence, by id"),
    ("consolidate.rs::ARCHIVE_CANDIDATES", "consolidation finds every user's one-off facts to archive"),
    ("consolidate.rs::ARCHIVE_BATCH", "consolidation archives the one-off facts it found, by id"),
    // The worker's passes over every user.
    ("embed.rs::PENDING", "the embedding pass takes memories written without an embedding, any user's, in id order"),
    ("pack.rs::DUE", "the pack pass finds the users and models whose packs are due"),
    ("pack.rs::SWEEP", "the pack pass drops the packs and marks of users and models that have none left"),
    ("hits.rs::FOLD", "the hit fold writes the hits recorded in shared memory, which name a memory by its table and id"),
    ("hits.rs::STILL_THERE", "the hit fold asks which of the memories it passed over (held by another transaction) are still there"),
    // Calls given a memory's id alone find its user by the id, once; what follows names it.
    ("update.rs::OWNER", "memory_update(id, ...) finds the memory's user by its id"),
    ("schema.sql::memory_evidence", "memory_evidence(id) finds the summary's user by its id, then reads that user's evidence"),
    // memory_stats counts each user the role may see (the policies narrow it to the session's).
    ("schema.sql::memory_stats", "the memory_stats view counts the memories of every user the role sees"),
    // Erasure keeps a predicate that another user declared or uses.
    ("schema.sql::memory_erase", "erasure keeps the predicates that another user declared or still uses"),
];

/// One SQL text: where it is, and its text.
struct Text {
    name: String,
    sql: String,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace").to_path_buf()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The string literals of a Rust source, each with the constant it starts (if any). A `\` at a
/// line's end joins the next line, as Rust does.
fn literals(src: &str) -> Vec<(Option<String>, String)> {
    let konst = Regex::new(r"(?:const|static)\s+([A-Z][A-Z0-9_]*)\s*:\s*&(?:'static\s+)?str\s*=\s*$").unwrap();
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'\'' => {
                // A char literal ('"', '\'') or a lifetime: skip a char literal whole.
                if b.get(i + 2) == Some(&b'\'') {
                    i += 3;
                } else if b.get(i + 1) == Some(&b'\\') {
                    i += 2;
                    while i < b.len() && b[i] != b'\'' {
                        i += 1;
                    }
                    i += 1;
                } else {
                    i += 1;
                }
            }
            b'r' if (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#'))
                && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')) =>
            {
                let start = i;
                let mut j = i + 1;
                let mut hashes = 0;
                while b.get(j) == Some(&b'#') {
                    hashes += 1;
                    j += 1;
                }
                if b.get(j) != Some(&b'"') {
                    i += 1;
                    continue;
                }
                let close = format!("\"{}", "#".repeat(hashes));
                let body_start = j + 1;
                let end = src[body_start..].find(&close).map(|e| body_start + e).unwrap_or(b.len());
                let name = konst.captures(&src[..start]).map(|c| c[1].to_string());
                out.push((name, src[body_start..end].to_string()));
                i = end + close.len();
            }
            b'"' => {
                let start = i;
                let mut s = String::new();
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        match b.get(i + 1) {
                            Some(b'\n') => {
                                i += 2;
                                while i < b.len() && (b[i] == b' ' || b[i] == b'\t' || b[i] == b'\n') {
                                    i += 1;
                                }
                                continue;
                            }
                            Some(b'n') => s.push('\n'),
                            Some(b't') => s.push('\t'),
                            Some(&c) => s.push(c as char),
                            None => {}
                        }
                        i += 2;
                    } else {
                        let ch = src[i..].chars().next().unwrap();
                        s.push(ch);
                        i += ch.len_utf8();
                    }
                }
                i += 1;
                let name = konst.captures(&src[..start]).map(|c| c[1].to_string());
                out.push((name, s));
            }
            _ => i += 1,
        }
    }
    out
}

/// The statements of a SQL file, each named by the function (or view) it belongs to.
fn sql_statements(file: &str, src: &str) -> Vec<Text> {
    let owner = Regex::new(r"(?i)CREATE\s+(?:OR\s+REPLACE\s+)?(?:FUNCTION|VIEW)\s+agent_memory\.(\w+)").unwrap();
    // Comments go first (a `;` in one does not end a statement).
    let line_comment = Regex::new(r"--[^\n]*").unwrap();
    let block_comment = Regex::new(r"(?s)/\*.*?\*/").unwrap();
    let src = block_comment.replace_all(&line_comment.replace_all(src, ""), "").into_owned();
    let mut out = Vec::new();
    let mut current = String::from("(top level)");
    for stmt in src.split(';') {
        if let Some(c) = owner.captures(stmt) {
            current = c[1].to_string();
        }
        out.push(Text { name: format!("{file}::{current}"), sql: stmt.to_string() });
    }
    out
}

fn texts() -> Vec<Text> {
    let root = root();
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    files.sort();
    let mut out = Vec::new();
    for path in files {
        // The in-server tests (`cargo pgrx test`) set up their own rows.
        if path.ends_with("tests.rs") {
            continue;
        }
        let src = std::fs::read_to_string(&path).unwrap();
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        for (n, (name, sql)) in literals(&src).into_iter().enumerate() {
            let name = match name {
                Some(c) => format!("{file}::{c}"),
                None => format!("{file}::literal #{n}: {}", sql.chars().take(60).collect::<String>()),
            };
            out.push(Text { name, sql });
        }
    }
    for file in ["schema.sql", "access.sql"] {
        let src = std::fs::read_to_string(root.join("sql").join(file)).unwrap();
        out.extend(sql_statements(file, &src));
    }
    out
}

/// Words that follow a table where an alias would be, and are not one.
const NOT_ALIAS: &[&str] = &[
    "where",
    "set",
    "on",
    "using",
    "join",
    "left",
    "right",
    "inner",
    "full",
    "cross",
    "natural",
    "order",
    "group",
    "limit",
    "for",
    "returning",
    "values",
    "select",
    "union",
    "except",
    "intersect",
    "having",
    "window",
    "offset",
    "fetch",
    "with",
    "tablesample",
    "default",
    "overriding",
    "and",
    "or",
    "lateral",
    "as",
];

/// The places in `sql` where it reads or changes a per-user table without naming its user.
///
/// A table names its user with a condition on its `user_id` (after WHERE, AND, ON or an opening
/// parenthesis: a column of the select list that compares the user is no condition), or by
/// joining its `user_id` to that of a per-user table of the same text that names its own.
fn unnamed_users(sql: &str) -> Vec<String> {
    let table = Regex::new(&format!(
        r"(?i)\b(FROM|JOIN|UPDATE|INTO|USING|DELETE\s+FROM)\s+(?:ONLY\s+)?agent_memory\.({})\b(?:\s+(?:AS\s+)?([A-Za-z_]\w*))?(\s*\()?",
        PER_USER.join("|")
    ))
    .unwrap();
    let mut out = Vec::new();
    // (what it is, the name its columns go by) of each per-user table read or changed.
    let mut refs: Vec<(String, String)> = Vec::new();
    let user_column = Regex::new(r"\buser_id\b").unwrap();
    for c in table.captures_iter(sql) {
        let verb = c[1].to_ascii_uppercase();
        let name = &c[2];
        let alias = c.get(3).map(|a| a.as_str()).filter(|a| !NOT_ALIAS.contains(&a.to_ascii_lowercase().as_str()));
        if verb == "INTO" {
            // INSERT INTO t (columns): the user is among the columns.
            let rest = &sql[c.get(0).unwrap().end()..];
            let columns = rest.split(')').next().unwrap_or("");
            if c.get(4).is_none() || !user_column.is_match(columns) {
                out.push(format!("INSERT INTO {name} without user_id among its columns"));
            }
            continue;
        }
        let what = format!("{verb} {name}{}", alias.map(|a| format!(" {a}")).unwrap_or_default());
        refs.push((what, alias.unwrap_or(name).to_string()));
    }
    let cond = r"(?i)(?:\bWHERE|\bAND|\bON|\()\s*";
    let eq = r"(?:=|OPERATOR\s*\(\s*pg_catalog\.=\s*\))";
    let mut named: Vec<bool> = vec![false; refs.len()];
    let mut joins: Vec<(usize, usize)> = Vec::new();
    for (i, (_, who)) in refs.iter().enumerate() {
        let q = regex::escape(who);
        let mut direct = Vec::new();
        // who.user_id = x, x = who.user_id: x is another table's user (a join) or a value.
        for re in [format!(r"{cond}{q}\.user_id\s*{eq}\s*([\w.$]+)"), format!(r"{cond}([\w.$]+)\s*{eq}\s*{q}\.user_id\b")] {
            for c in Regex::new(&re).unwrap().captures_iter(sql) {
                direct.push(c[1].to_string());
            }
        }
        for other in direct {
            let partner = other.strip_suffix(".user_id").and_then(|a| refs.iter().position(|(_, w)| w.eq_ignore_ascii_case(a)));
            match partner {
                Some(j) if j != i => joins.push((i, j)),
                _ => named[i] = true,
            }
        }
        // who.user_id IN (...), (who.user_id, ...) IN / =, and a bare user_id = x.
        let others = format!(
            r"{cond}(?:{q}\.user_id\s*IN\b|\(\s*{q}\.user_id\s*,[^)]*\)\s*(?:IN|=){})",
            if refs.iter().filter(|(_, w)| w == who).count() == 1 && !sql.contains(&format!("{who}.")) {
                format!(r"|user_id\s*{eq}")
            } else {
                String::new()
            }
        );
        if Regex::new(&others).unwrap().is_match(sql) {
            named[i] = true;
        }
    }
    // A join to a table that names its user names it too.
    loop {
        let mut changed = false;
        for &(i, j) in &joins {
            if named[j] && !named[i] {
                named[i] = true;
                changed = true;
            }
            if named[i] && !named[j] {
                named[j] = true;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    for (i, (what, _)) in refs.iter().enumerate() {
        if !named[i] {
            out.push(format!("{what} without a user_id predicate"));
        }
    }
    out
}

#[test]
fn every_per_user_statement_names_its_user() {
    let allowed: BTreeMap<&str, &str> = CROSS_USER.iter().copied().collect();
    let mut seen = std::collections::BTreeSet::new();
    let mut failures = Vec::new();
    let mut checked = 0;
    for t in texts() {
        let problems = unnamed_users(&t.sql);
        if !Regex::new(&format!(r"agent_memory\.({})\b", PER_USER.join("|"))).unwrap().is_match(&t.sql) {
            continue;
        }
        checked += 1;
        if problems.is_empty() {
            continue;
        }
        if allowed.contains_key(t.name.as_str()) {
            seen.insert(t.name.clone());
            continue;
        }
        failures.push(format!("{}: {}\n    {}", t.name, problems.join("; "), t.sql.split_whitespace().collect::<Vec<_>>().join(" ")));
    }
    assert!(checked > 50, "only {checked} SQL texts over per-user tables were found: is the reader broken?");
    let stale: Vec<_> = allowed.keys().filter(|k| !seen.contains(**k)).collect();
    assert!(
        failures.is_empty() && stale.is_empty(),
        "{} statement(s) over per-user tables do not name their user:\n{}\n\nallow-list entries that match no such statement (remove them): {stale:?}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn the_reader_finds_what_it_should() {
    // A by-ctid delete is caught, and the same with its user is not.
    assert!(!unnamed_users("DELETE FROM agent_memory.memory_pack_stale WHERE ctid = ANY ($1::tid[])").is_empty());
    assert!(unnamed_users("DELETE FROM agent_memory.memory_pack_stale WHERE user_id = $2 AND ctid = ANY ($1::tid[])").is_empty());
    // Each table of a statement needs its own predicate.
    let touch = "WITH l AS (SELECT id FROM agent_memory.memories WHERE user_id = $2 AND id = ANY ($1)) \
                 UPDATE agent_memory.memories m SET hit_count = 1 FROM l WHERE m.id = l.id";
    assert_eq!(unnamed_users(touch), vec!["UPDATE memories m without a user_id predicate".to_string()]);
    assert!(unnamed_users("SELECT 1 FROM agent_memory.turns t JOIN agent_memory.memories m ON m.user_id = t.user_id WHERE t.user_id = $1")
        .is_empty());
    // A join between two tables, neither of which names its user, names none.
    assert_eq!(
        unnamed_users("SELECT 1 FROM agent_memory.memories s JOIN agent_memory.memories m ON m.user_id = s.user_id WHERE s.id = $1"),
        vec!["FROM memories s without a user_id predicate".to_string(), "JOIN memories m without a user_id predicate".to_string()]
    );
    // A column of the select list that compares the user is no condition.
    assert!(!unnamed_users("SELECT id, user_id = $2 FROM agent_memory.memories WHERE id = ANY ($1)").is_empty());
    assert!(unnamed_users("SELECT id FROM agent_memory.memories WHERE user_id = $2 AND id = ANY ($1)").is_empty());
    assert!(!unnamed_users("INSERT INTO agent_memory.memory_pack_stale (embedding_model, id) VALUES ($1, $2)").is_empty());
    assert!(unnamed_users("INSERT INTO agent_memory.memory_pack_stale (user_id, embedding_model, id) VALUES ($1, $2, $3)").is_empty());
    // Literals: a constant names its text, continuation lines join.
    let l = literals("const A: &str = \"SELECT 1 \\\n   FROM x\";\nfn f() { g(r#\"q \"x\" \"#); let c = '\"'; }\n");
    assert_eq!(l[0], (Some("A".to_string()), "SELECT 1 FROM x".to_string()));
    assert_eq!(l[1], (None, "q \"x\" ".to_string()));
    assert_eq!(l.len(), 2);
}
