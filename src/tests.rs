// `#[pg_test]` tests: the SQL functions inside one backend (run with `cargo pgrx test`).
// Included into `mod tests` in lib.rs.

use pgrx::prelude::*;

/// Inserts `n` memories for `user` with deterministic 8-dimensional embeddings; returns nothing.
fn seed(user: &str, n: i32, model: &str) {
    Spi::run_with_args(
        "INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model, importance, last_hit_at)
         SELECT $1, 'memory ' || g, \
                ARRAY(SELECT sin(g * 7 + d * 13 + length($1)) FROM generate_series(1, 8) d)::real[]::vector, \
                $3, (g % 10) / 10.0, now() - make_interval(hours => g % 50)
           FROM generate_series(1, $2) g",
        &[user.into(), n.into(), model.into()],
    )
    .unwrap();
}

fn count(sql: &str) -> i64 {
    Spi::get_one::<i64>(sql).unwrap().unwrap_or(0)
}

/// Two tests' forgetting passes never overlap (a pass refuses while another holds its lock, and
/// tests run in parallel): each test that runs one takes this lock first, until its transaction
/// ends.
fn one_forget_pass_at_a_time() {
    Spi::run("SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('agent_memory tests: forget'))").unwrap();
}

#[pg_test]
fn decay_score_matches_the_reference_formula() {
    let s = Spi::get_one::<f64>("SELECT agent_memory.memory_decay_score(0.9, interval '3 days', 0.5)").unwrap().unwrap();
    let want = 0.9 * 0.995f64.powf(72.0) * 1.0;
    assert!((s - want).abs() < 1e-9, "{s} vs {want}");
    let none = Spi::get_one::<f64>("SELECT agent_memory.memory_decay_score(0.9, interval '300 days', 1, 'none')").unwrap().unwrap();
    assert!((none - 0.9 * 1.2).abs() < 1e-9);
    let floored = Spi::get_one::<f64>("SELECT agent_memory.memory_decay_score(1, interval '300 days', 0.5, 'exponential', 0.4)")
        .unwrap()
        .unwrap();
    assert!((floored - 0.4).abs() < 1e-6);
}

#[pg_test]
fn decay_base_is_a_setting() {
    Spi::run("SET agent_memory.decay_base = 0.5").unwrap();
    let s = Spi::get_one::<f64>("SELECT agent_memory.memory_decay_score(1, interval '2 hours', 0.5)").unwrap().unwrap();
    assert!((s - 0.25).abs() < 1e-9, "{s}");
}

#[pg_test]
fn recall_returns_k_rows_in_exact_order() {
    seed("alice", 300, "m8");
    seed("bob", 50, "m8");
    let q = "'[0.3,-0.2,0.5,0.1,0.9,-0.4,0.2,0.7]'::vector";
    // The brief's reference score decays every memory by its age.
    Spi::run("SET agent_memory.decay_scope = 'all'").unwrap();
    let got: Vec<i64> = Spi::connect(|c| {
        c.select(&format!("SELECT id FROM agent_memory.memory_recall('alice', {q}, 7, model => 'm8', touch => false)"), None, &[])
            .unwrap()
            .map(|r| r.get::<i64>(1).unwrap().unwrap())
            .collect()
    });
    // The same ranking computed in SQL with pgvector's cosine distance.
    let want: Vec<i64> = Spi::connect(|c| {
        c.select(
            &format!(
                "SELECT id FROM agent_memory.memories WHERE user_id = 'alice' AND active
                  ORDER BY (1 - (emb <=> {q})) * power(0.995, extract(epoch FROM now() - last_hit_at) / 3600)
                           * (0.8 + 0.4 * importance) DESC, id DESC LIMIT 7"
            ),
            None,
            &[],
        )
        .unwrap()
        .map(|r| r.get::<i64>(1).unwrap().unwrap())
        .collect()
    });
    assert_eq!(got, want);
    assert_eq!(count(&format!("SELECT count(*) FROM agent_memory.memory_recall('bob', {q}, 100, model => 'm8')")), 50);
}

#[pg_test]
fn recall_sees_only_its_model_and_active_unexpired_rows() {
    seed("carol", 20, "m8");
    seed("carol", 20, "other");
    Spi::run("UPDATE agent_memory.memories SET active = false, retired_at = now(), retired_reason = 'test' WHERE user_id = 'carol' AND content IN ('memory 1', 'memory 2')").unwrap();
    Spi::run("UPDATE agent_memory.memories SET expires_at = now() - interval '1 second' WHERE user_id = 'carol' AND content = 'memory 3'").unwrap();
    let q = "'[1,1,1,1,1,1,1,1]'::vector";
    // 20 per model, minus 2 retired and 1 expired in each model.
    assert_eq!(count(&format!("SELECT count(*) FROM agent_memory.memory_recall('carol', {q}, 1000, model => 'm8')")), 17);
    assert_eq!(count(&format!("SELECT count(*) FROM agent_memory.memory_recall('carol', {q}, 1000, model => 'other')")), 17);
    assert_eq!(count(&format!("SELECT count(*) FROM agent_memory.memory_recall('carol', {q}, 1000, model => 'none-such')")), 0);
}

#[pg_test]
fn touch_refreshes_only_returned_rows() {
    seed("dave", 30, "m8");
    let q = "'[1,0,1,0,1,0,1,0]'::vector";
    Spi::run(&format!("SELECT * FROM agent_memory.memory_recall('dave', {q}, 3, model => 'm8', touch => false)")).unwrap();
    assert_eq!(count("SELECT sum(hit_count) FROM agent_memory.memories WHERE user_id = 'dave'"), 0);
    Spi::run(&format!("SELECT * FROM agent_memory.memory_recall('dave', {q}, 3, model => 'm8')")).unwrap();
    assert_eq!(count("SELECT count(*) FROM agent_memory.memories WHERE user_id = 'dave' AND hit_count = 1"), 3);
    assert_eq!(count("SELECT count(*) FROM agent_memory.memories WHERE user_id = 'dave' AND hit_count = 0"), 27);
}

#[pg_test]
fn halfvec_queries_rank_like_vector_queries() {
    seed("erin", 40, "m8");
    let ids = |t: &str| -> Vec<i64> {
        Spi::connect(|c| {
            c.select(
                &format!("SELECT id FROM agent_memory.memory_recall('erin', '[0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8]'::{t}, 5, model => 'm8', touch => false)"),
                None,
                &[],
            )
            .unwrap()
            .map(|r| r.get::<i64>(1).unwrap().unwrap())
            .collect()
        })
    };
    assert_eq!(ids("vector"), ids("halfvec"));
    assert_eq!(ids("vector").len(), 5);
}

#[pg_test(error = "the query has 3 dimensions but the memories of model \"m8\" have 8")]
fn dimension_mismatch_is_an_error() {
    seed("frank", 5, "m8");
    Spi::run("SELECT * FROM agent_memory.memory_recall('frank', '[1,2,3]'::vector, 5, model => 'm8')").unwrap();
}

#[pg_test(error = "k must be between 1 and 1000, not 0")]
fn k_zero_is_an_error() {
    Spi::run("SELECT * FROM agent_memory.memory_recall('x', '[1,2,3]'::vector, 0)").unwrap();
}

#[pg_test(error = "user_id must not be NULL")]
fn null_user_is_an_error() {
    Spi::run("SELECT * FROM agent_memory.memory_recall(NULL, '[1,2,3]'::vector)").unwrap();
}

#[pg_test(error = "unknown decay mode \"sideways\"")]
fn unknown_decay_mode_is_an_error() {
    Spi::run("SELECT * FROM agent_memory.memory_recall('x', '[1,2,3]'::vector, decay => 'sideways')").unwrap();
}

#[pg_test(error = "the query vector: the vector is all zeros")]
fn zero_query_is_an_error() {
    Spi::run("SELECT * FROM agent_memory.memory_recall('x', '[0,0,0]'::vector)").unwrap();
}

#[pg_test]
fn text_queries_are_parsed_as_vectors() {
    seed("gina", 40, "m8");
    let ids = |arg: &str| -> Vec<i64> {
        Spi::connect(|c| {
            c.select(&format!("SELECT id FROM agent_memory.memory_recall('gina', {arg}, 5, model => 'm8', touch => false)"), None, &[])
                .unwrap()
                .map(|r| r.get::<i64>(1).unwrap().unwrap())
                .collect()
        })
    };
    assert_eq!(ids("'[0.5,0.1,0,0,0,0,0,0.2]'"), ids("'[0.5,0.1,0,0,0,0,0,0.2]'::vector"));
    assert_eq!(ids("'[0.5,0.1,0,0,0,0,0,0.2]'::text").len(), 5);
}

#[pg_test]
fn kinds_filter_and_validity_are_applied_by_the_scan() {
    seed("hana", 30, "m8");
    Spi::run("UPDATE agent_memory.memories SET kind = 'episodic' WHERE user_id = 'hana' AND content IN ('memory 1', 'memory 2', 'memory 3', 'memory 4')").unwrap();
    Spi::run("UPDATE agent_memory.memories SET valid_until = now() - interval '1 hour' WHERE user_id = 'hana' AND content = 'memory 4'").unwrap();
    let q = "'[1,2,3,4,5,6,7,8]'::vector";
    let kinds = |sql_kinds: &str| -> Vec<String> {
        Spi::connect(|c| {
            c.select(
                &format!("SELECT kind FROM agent_memory.memory_recall('hana', {q}, 100, model => 'm8', kinds => {sql_kinds}, touch => false)"),
                None,
                &[],
            )
            .unwrap()
            .map(|r| r.get::<String>(1).unwrap().unwrap())
            .collect()
        })
    };
    // Memory 4 is episodic but no longer valid.
    assert_eq!(kinds("ARRAY['episodic']"), vec!["episodic"; 3]);
    assert_eq!(kinds("ARRAY['semantic']").len(), 26);
    assert_eq!(kinds("NULL").len(), 29);
    assert_eq!(kinds("ARRAY['semantic', 'episodic']").len(), 29);
}

#[pg_test]
fn retention_score_follows_the_core_weights() {
    let s = Spi::get_one::<f64>("SELECT agent_memory.memory_retention_score(0.5, now(), 3)").unwrap().unwrap();
    let want = agent_memory_core::forget::RetentionWeights::default().score(0.5, 0.0, 3.0);
    assert!((s - want).abs() < 1e-9, "{s} vs {want}");
    let older = Spi::get_one::<f64>("SELECT agent_memory.memory_retention_score(0.5, now() - interval '7 days', 3)").unwrap().unwrap();
    assert!(older < s);
    // The recency half-life is a setting: after one half-life the recency term has halved.
    Spi::run("SET agent_memory.recency_halflife = '1h'").unwrap();
    let w = agent_memory_core::forget::RetentionWeights::default();
    let halved = Spi::get_one::<f64>("SELECT agent_memory.memory_retention_score(0, now() - interval '1 hour', 0)").unwrap().unwrap();
    assert!((halved - w.recency * 0.5).abs() < 1e-6, "{halved}");
}

#[pg_test]
fn forget_evicts_down_to_the_capacity_and_keeps_protected() {
    seed("cap-user", 30, "cap-8");
    Spi::run("UPDATE agent_memory.memories SET protected = true WHERE user_id = 'cap-user' AND content IN ('memory 1', 'memory 2')").unwrap();
    Spi::run("SET agent_memory.capacity = 10").unwrap();
    one_forget_pass_at_a_time();
    let evicted = Spi::get_one::<i64>("SELECT rows FROM agent_memory.memory_forget() WHERE step = 'evict'").unwrap().unwrap();
    assert_eq!(evicted, 20);
    assert_eq!(count("SELECT count(*) FROM agent_memory.memories WHERE user_id = 'cap-user' AND active"), 10);
    assert_eq!(count("SELECT count(*) FROM agent_memory.memories WHERE user_id = 'cap-user' AND active AND protected"), 2);
    assert_eq!(count("SELECT count(*) FROM agent_memory.runs WHERE job = 'forget' AND status = 'succeeded'"), 1);
}

#[pg_test]
fn consolidate_dry_run_changes_nothing_and_predicts_the_pass() {
    seed("dry-user", 20, "dry-8");
    Spi::run("UPDATE agent_memory.memories SET created_at = now() - interval '60 days', kind = 'episodic' WHERE content IN ('memory 1', 'memory 2', 'memory 3')").unwrap();
    Spi::run("UPDATE agent_memory.memories SET created_at = now() - interval '60 days' WHERE user_id = 'dry-user'").unwrap();
    let state = || Spi::get_one::<String>("SELECT md5(string_agg(m::text, '|' ORDER BY id)) FROM agent_memory.memories m").unwrap();
    let steps = |sql: &str| -> Vec<(String, i64)> {
        Spi::connect(|c| {
            c.select(sql, None, &[])
                .unwrap()
                .map(|r| (r.get::<String>(1).unwrap().unwrap(), r.get::<i64>(2).unwrap().unwrap()))
                .collect()
        })
    };
    let before = state();
    let dry = steps("SELECT * FROM agent_memory.memory_consolidate(dry_run => true)");
    assert_eq!(before, state());
    let real = steps("SELECT * FROM agent_memory.memory_consolidate()");
    assert_eq!(dry, real);
    assert!(real.iter().map(|(_, n)| n).sum::<i64>() > 0, "{real:?}");
}

/// Reading the recall index's leaf pages directly finds exactly the entries the index AM's scan
/// finds, in the same order: on an index of several levels (long user ids), for users whose ids
/// are prefixes of others', a user with no entries, several models, entries of older row
/// versions (posting lists after updates), and a limit.
#[pg_test]
fn the_leaf_walk_finds_the_entries_the_index_scan_finds() {
    let long = |s: &str| format!("{s}-{}", "x".repeat(180));
    let users: Vec<String> = ["a", "b", "b1", "b10", "c"].iter().map(|u| long(u)).collect();
    // Interleaved, as concurrent traffic writes them.
    Spi::run_with_args(
        "INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model, importance)
         SELECT ($1::text[])[1 + g % 5], 'memory ' || g, '[1,2]'::vector, CASE WHEN g % 7 = 0 THEN 'other' ELSE 'm2' END, 0.5
           FROM generate_series(1, 6000) g",
        &[users.clone().into()],
    )
    .unwrap();
    // New versions outside HOT (a changed text changes an indexed expression): the recall
    // index gets a second entry with the same key.
    Spi::run("UPDATE agent_memory.memories SET content = content || ' again' WHERE id % 3 = 0").unwrap();
    let pages = Spi::get_one::<i64>("SELECT pg_relation_size('agent_memory.memories_user_model_active') / 8192").unwrap().unwrap();
    assert!(pages > 150, "an index of several levels: {pages} pages");
    let mut all = users.clone();
    all.extend([long("b0"), long("bb"), long(""), "a".to_string(), "zzz".to_string()]);
    for user in &all {
        for model in ["m2", "other", "none"] {
            for limit in [usize::MAX, 100] {
                let (mut walked, mut scanned) = (Vec::new(), Vec::new());
                let a = crate::scan::entries_by_walk(user, model, limit, &mut walked)
                    .unwrap()
                    .unwrap_or_else(|| panic!("{user} {model}: the walk applies"));
                let b = crate::scan::entries_by_scan(user, model, limit, &mut scanned).unwrap();
                let key = |v: &Vec<(i64, pgrx::pg_sys::ItemPointerData)>| {
                    v.iter().map(|(id, t)| (*id, t.ip_blkid.bi_hi, t.ip_blkid.bi_lo, t.ip_posid)).collect::<Vec<_>>()
                };
                assert_eq!(a, b, "{user} {model} {limit}: complete");
                assert_eq!(key(&walked), key(&scanned), "{user} {model} {limit}");
                if users.contains(user) && model == "m2" && limit == usize::MAX {
                    assert!(walked.len() > 1000, "{user}: {} entries", walked.len());
                    assert!(walked.windows(2).any(|w| w[0].0 == w[1].0), "{user}: entries of older versions");
                }
            }
        }
    }
}

/// Eviction ranks in a read of its own, then retires in a batch only the chosen rows that are
/// still as they were read: a row written in between (here a touch, and a new protection) keeps
/// its place until the next pass ranks it again.
#[pg_test]
fn eviction_retires_only_the_rows_still_as_ranked() {
    seed("rank-user", 30, "rank-8");
    let users = vec![("rank-user".to_string(), 20, vec!["rank-8".to_string()])];
    let weights = crate::gucs::retention_weights();
    let (ids, tids) = crate::api::forget::rank_users(&users, 10, 1000, &weights).unwrap();
    assert_eq!(ids.len(), 20);
    assert_eq!(tids.len(), 20);
    Spi::run_with_args("UPDATE agent_memory.memories SET hit_count = hit_count + 1 WHERE id = $1", &[ids[0].into()]).unwrap();
    Spi::run_with_args("UPDATE agent_memory.memories SET protected = true WHERE id = $1", &[ids[1].into()]).unwrap();
    let retired = Spi::connect_mut(|c| crate::api::forget::retire_rows(c, &crate::placement::TableSet::base(), ids.clone(), tids.clone())).unwrap();
    assert_eq!(retired, 18);
    let still = |id: i64| Spi::get_one_with_args::<bool>("SELECT active FROM agent_memory.memories WHERE id = $1", &[id.into()]).unwrap();
    assert_eq!(still(ids[0]), Some(true));
    assert_eq!(still(ids[1]), Some(true));
    assert_eq!(count("SELECT count(*) FROM agent_memory.memories WHERE user_id = 'rank-user' AND NOT active AND retired_reason = 'evicted'"), 18);
    // The next pass ranks again and brings the user down to the capacity.
    Spi::run("SET agent_memory.capacity = 10").unwrap();
    one_forget_pass_at_a_time();
    Spi::run("SELECT * FROM agent_memory.memory_forget()").unwrap();
    assert_eq!(count("SELECT count(*) FROM agent_memory.memories WHERE user_id = 'rank-user' AND active"), 10);
}

/// The pack cursor reads one pack ahead: each pack is handed out once, in pack order, still
/// intact after the next one was fetched into the other slot, and with the next one's bytes as
/// its `Ahead` (none after the last).
#[pg_test]
fn the_pack_cursor_hands_out_each_pack_once_with_the_next_one_ahead() {
    // 2,000 dimensions: three memories to a pack, so 40 memories make 14 packs.
    Spi::run(
        "INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model)
         SELECT 'cursor-user', 'memory ' || g,
                (SELECT array_agg(sin(g * 0.37 * j + j * 0.011))::real[]::vector FROM generate_series(1, 2000) j), 'c2000'
           FROM generate_series(1, 40) g",
    )
    .unwrap();
    assert_eq!(Spi::get_one::<i64>("SELECT agent_memory.memory_pack('cursor-user')").unwrap(), Some(40));
    let want: Vec<Vec<u8>> = Spi::connect(|c| {
        c.select(
            "SELECT payload FROM agent_memory.memory_packs WHERE user_id = 'cursor-user' AND part = 'embeddings' ORDER BY pack_no",
            None,
            &[],
        )
        .unwrap()
        .map(|r| r.get::<Vec<u8>>(1).unwrap().unwrap())
        .collect()
    });
    assert_eq!(want.len(), 14);
    // Read as a later statement of the transaction would: the packs written above are visible.
    let (got, aheads_right) = crate::scan::with_fresh_snapshot(|| {
        let mut cursor = crate::scan::PackCursor::open("cursor-user", "c2000", "embeddings").unwrap().unwrap();
        let mut got: Vec<Vec<u8>> = Vec::new();
        let mut aheads_right = 0;
        while let Some((pack, ahead)) = cursor.next_with_ahead() {
            aheads_right += usize::from(ahead.bytes() == want.get(got.len() + 1).map(|p| p.as_slice()));
            got.push(pack.to_vec());
        }
        assert!(cursor.next_with_ahead().is_none());
        (got, aheads_right)
    });
    assert_eq!(got.len(), want.len());
    assert!(got == want, "the packs handed out differ from the table's, in pack order");
    assert_eq!(aheads_right, want.len(), "each pack's Ahead is the next pack (none after the last)");
}

#[pg_test]
fn packed_recalls_in_one_backend_start_from_empty_arrays() {
    // The arrays a packed recall fills are kept by the backend for its next call: each call must
    // see its own user's memories only, as the rows say without packs.
    Spi::run(
        "INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model, importance)
         SELECT u, 'note ' || g || CASE WHEN g % 3 = 0 THEN ' parcel refund' ELSE ' garden' END,
                ARRAY(SELECT sin(g * 0.7 + d * 1.3 + length(u)) FROM generate_series(1, 8) d)::real[]::vector, 'k8', (g % 10) / 10.0
           FROM (VALUES ('kept-a', 400), ('kept-b', 90), ('kept-c', 250)) AS s(u, n), generate_series(1, n) g",
    )
    .unwrap();
    for u in ["kept-a", "kept-b", "kept-c"] {
        assert!(Spi::get_one_with_args::<i64>("SELECT agent_memory.memory_pack($1)", &[u.into()]).unwrap().unwrap() > 0);
    }
    let q = "'[0.3,-0.2,0.5,0.1,0.9,-0.4,0.2,0.7]'::vector";
    let calls = [
        format!("SELECT id, score FROM agent_memory.memory_recall($1, {q}, 8, model => 'k8', touch => false)"),
        format!(
            "SELECT id, score FROM agent_memory.memory_recall($1, {q}, 8, model => 'k8', touch => false, query_text => 'parcel refund')"
        ),
        "SELECT id, score FROM agent_memory.memory_recall($1, NULL, 8, model => 'k8', touch => false, query_text => 'refund')".to_string(),
    ];
    let run = |sql: &str, user: &str| -> Vec<(i64, String)> {
        Spi::connect(|c| {
            c.select(sql, None, &[user.into()])
                .unwrap()
                // To 6 decimals: hybrid recall's convex fusion scales similarities by their range,
                // and one read from a row and one counted for a pack agree to float rounding.
                .map(|r| (r.get::<i64>(1).unwrap().unwrap(), format!("{:.6}", r.get::<f64>(2).unwrap().unwrap())))
                .collect()
        })
    };
    let owner = |id: i64| Spi::get_one_with_args::<String>("SELECT user_id FROM agent_memory.memories WHERE id = $1", &[id.into()]).unwrap().unwrap();
    // Large, small, large again, and the other way round: a call after a larger one reuses its arrays.
    for user in ["kept-a", "kept-b", "kept-c", "kept-a", "kept-b"] {
        for sql in &calls {
            Spi::run("SET agent_memory.packed_recall = on").unwrap();
            let packed = run(sql, user);
            Spi::run("SET agent_memory.packed_recall = off").unwrap();
            let rows = run(sql, user);
            assert_eq!(packed.len(), 8, "{user}: {sql}");
            assert_eq!(packed, rows, "{user}: {sql}");
            assert!(packed.iter().all(|(id, _)| owner(*id) == user), "{user}: another user's memory in {packed:?}");
        }
    }
    Spi::run("RESET agent_memory.packed_recall").unwrap();
}

/// A pass's statements run on the set of tables it is given: the same text names a set's
/// tables in place of the extension's, once per statement and set, and a batch of forgetting's
/// purge deletes from the set's tables only.
#[pg_test]
fn a_table_set_renames_a_statement_tables_and_runs_on_them() {
    use crate::placement::TableSet;
    const PURGE: &str = "DELETE FROM agent_memory.turns t WHERE t.user_id = $1 AND t.content LIKE 'old%'";
    let base = TableSet::base();
    assert_eq!(base.sql(PURGE), PURGE);
    let names = agent_memory_core::tables::PER_USER.map(|t| format!("{t}_copy"));
    let copy = TableSet::named(names);
    let renamed = copy.sql(PURGE);
    assert_eq!(renamed, "DELETE FROM agent_memory.\"turns_copy\" t WHERE t.user_id = $1 AND t.content LIKE 'old%'");
    // Made once: the same text comes back (the key of its kept plan).
    assert!(std::ptr::eq(renamed, copy.sql(PURGE)));
    // The set's table of memories is found by its name, and is not the extension's.
    assert!(copy.memories_table().is_err(), "no table memories_copy yet");
    Spi::run("CREATE TABLE agent_memory.memories_copy (LIKE agent_memory.memories)").unwrap();
    Spi::run("CREATE TABLE agent_memory.turns_copy (LIKE agent_memory.turns)").unwrap();
    assert_ne!(copy.memories_table().unwrap(), base.memories_table().unwrap());
    Spi::run("INSERT INTO agent_memory.turns (user_id, session_id, role, content) VALUES ('ts-user', 's', 'user', 'old turn')")
        .unwrap();
    Spi::run("INSERT INTO agent_memory.turns_copy SELECT * FROM agent_memory.turns WHERE user_id = 'ts-user'").unwrap();
    Spi::connect_mut(|c| crate::plans::write(c, copy.sql(PURGE), &["ts-user".into()]).map(|_| ())).unwrap();
    assert_eq!(count("SELECT count(*) FROM agent_memory.turns_copy WHERE user_id = 'ts-user'"), 0);
    assert_eq!(count("SELECT count(*) FROM agent_memory.turns WHERE user_id = 'ts-user'"), 1);
}
