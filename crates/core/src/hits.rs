//! Recall's hits, gathered between two folds: a fixed table of slots (the server's shared
//! memory holds one), one slot per (database, memory) with how often recall returned the memory
//! and when it last did. Recall adds to it; the background worker takes a database's slots out
//! in one go and folds them into `last_hit_at` and `hit_count`.
//!
//! Open addressing with linear probing over a power-of-two number of slots; a slot of database 0
//! (no database has that id) is free. The table counts as full at three quarters of its slots, so
//! a probe always ends quickly; a hit of a new memory that finds it full is dropped (and counted
//! by the caller), while a hit of a memory already in the table is always counted.
//!
//! No user may take more than a share of the table (`user_limit`: an eighth, at least 64 slots):
//! each slot carries its user's bucket (a hash of the user's id into `USER_BUCKETS`), and the
//! slots of each bucket are counted, so one tenant recalling many memories between two folds
//! drops only its own new hits, never another's.

/// One slot: a memory's hits since the last fold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Slot {
    /// The database's id; 0 for a free slot.
    pub database: u32,
    /// How often recall returned the memory.
    pub count: u32,
    /// The table of memories the id is of (a table dropped and created again numbers its
    /// memories anew: hits of the old one are not the new one's).
    pub relation: u32,
    /// The memory's id.
    pub id: i64,
    /// When recall last returned it (the caller's clock: PostgreSQL's microseconds).
    pub at: i64,
    /// The bucket of the memory's user (`user_bucket`).
    pub user: u32,
}

/// A memory's hits as the fold applies them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hit {
    pub id: i64,
    pub count: u32,
    pub at: i64,
    pub relation: u32,
    /// The bucket of the memory's user (`user_bucket`).
    pub user: u32,
}

/// Buckets the users are counted in (users whose ids hash alike share one).
pub const USER_BUCKETS: usize = 1024;

/// What the caller keeps beside the table: the slots taken, in all and per user bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Usage {
    pub used: usize,
    pub by_user: [u32; USER_BUCKETS],
}

impl Default for Usage {
    fn default() -> Self {
        Usage { used: 0, by_user: [0; USER_BUCKETS] }
    }
}

/// The bucket of a user's id (FNV-1a).
pub fn user_bucket(user: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in user.bytes() {
        h = (h ^ b as u32).wrapping_mul(0x0100_0193);
    }
    h % USER_BUCKETS as u32
}

/// How many slots one user bucket may take: an eighth of what the table holds, at least 64 (all
/// of a table smaller than that).
pub fn user_limit(slots: usize) -> usize {
    (limit(slots) / 8).max(64).min(limit(slots))
}

/// How many slots to reserve for a table of `wanted` memories: the power of two that holds them
/// at most three quarters full (0 for none).
pub fn slots_for(wanted: usize) -> usize {
    if wanted == 0 {
        return 0;
    }
    let mut n = (wanted.saturating_mul(4) / 3).max(4).next_power_of_two();
    while limit(n) < wanted {
        n *= 2;
    }
    n
}

/// How many slots may be taken before the table counts as full.
pub fn limit(slots: usize) -> usize {
    slots / 4 * 3 + (slots % 4) * 3 / 4
}

fn home(slots: usize, database: u32, id: i64) -> usize {
    // A multiplicative hash of both keys (Fibonacci hashing); `slots` is a power of two.
    let key = (id as u64) ^ ((database as u64) << 40) ^ (database as u64);
    let h = key.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (h >> 32) as usize & (slots - 1)
}

/// What `record` did with a hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recorded {
    /// The memory already had a slot: its count went up.
    Counted,
    /// The memory took a free slot.
    Added,
    /// The table was full: the hit is lost.
    Dropped,
}

/// Adds one hit of memory `id` (of table `relation` in `database`, of the user in bucket `user`)
/// at `at` to the table; `usage` is kept by the caller beside the table.
pub fn record(table: &mut [Slot], usage: &mut Usage, database: u32, relation: u32, id: i64, at: i64, user: u32) -> Recorded {
    add(table, usage, database, Hit { id, count: 1, at, relation, user })
}

fn add(table: &mut [Slot], usage: &mut Usage, database: u32, hit: Hit) -> Recorded {
    let n = table.len();
    if n == 0 || database == 0 {
        return Recorded::Dropped;
    }
    let bucket = hit.user as usize % USER_BUCKETS;
    let mut i = home(n, database, hit.id);
    for _ in 0..n {
        let s = &mut table[i];
        if s.database == 0 {
            if usage.used >= limit(n) || usage.by_user[bucket] as usize >= user_limit(n) {
                return Recorded::Dropped;
            }
            *s = Slot { database, count: hit.count, relation: hit.relation, id: hit.id, at: hit.at, user: bucket as u32 };
            usage.used += 1;
            usage.by_user[bucket] += 1;
            return Recorded::Added;
        }
        if s.database == database && s.id == hit.id {
            if s.relation != hit.relation {
                // The id of a table that is gone: its hits go, the new table's count.
                (s.relation, s.count, s.at) = (hit.relation, hit.count, hit.at);
                return Recorded::Counted;
            }
            s.count = s.count.saturating_add(hit.count);
            s.at = s.at.max(hit.at);
            return Recorded::Counted;
        }
        i = (i + 1) & (n - 1);
    }
    Recorded::Dropped
}

/// Puts hits that were taken out back (a fold that failed), merging them with any recorded
/// since; returns how many could not be put back (the table, or the user's share, was full).
pub fn put_back(table: &mut [Slot], usage: &mut Usage, database: u32, hits: &[Hit]) -> usize {
    hits.iter().filter(|h| add(table, usage, database, **h) == Recorded::Dropped).count()
}

/// How many memories of `database` have hits waiting.
pub fn pending(table: &[Slot], database: u32) -> usize {
    table.iter().filter(|s| s.database == database && s.database != 0).count()
}

/// Takes every hit of `database` out of the table, in id order; the other databases' slots
/// stay (placed again, so their probes stay unbroken).
pub fn take(table: &mut [Slot], usage: &mut Usage, database: u32) -> Vec<Hit> {
    let mut out = Vec::new();
    let mut others = Vec::new();
    for s in table.iter_mut() {
        if s.database == 0 {
            continue;
        }
        if s.database == database {
            out.push(Hit { id: s.id, count: s.count, at: s.at, relation: s.relation, user: s.user });
        } else {
            others.push(*s);
        }
        *s = Slot::default();
    }
    *usage = Usage::default();
    for s in others {
        add(table, usage, s.database, Hit { id: s.id, count: s.count, at: s.at, relation: s.relation, user: s.user });
    }
    out.sort_unstable_by_key(|h| h.id);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(n: usize) -> (Vec<Slot>, Usage) {
        (vec![Slot::default(); slots_for(n)], Usage::default())
    }

    #[test]
    fn sizes_are_powers_of_two_with_room() {
        assert_eq!(slots_for(0), 0);
        for wanted in [1, 2, 3, 100, 65_536, 1_000_003] {
            let s = slots_for(wanted);
            assert!(s.is_power_of_two());
            assert!(limit(s) >= wanted, "{wanted} → {s}");
        }
    }

    #[test]
    fn repeated_hits_share_a_slot_and_keep_the_latest_time() {
        let (mut t, mut used) = table(16);
        assert_eq!(record(&mut t, &mut used, 5, 7, 42, 100, 0), Recorded::Added);
        assert_eq!(record(&mut t, &mut used, 5, 7, 42, 300, 0), Recorded::Counted);
        assert_eq!(record(&mut t, &mut used, 5, 7, 42, 200, 0), Recorded::Counted);
        assert_eq!(used.used, 1);
        assert_eq!(take(&mut t, &mut used, 5), vec![Hit { id: 42, count: 3, at: 300, relation: 7, user: 0 }]);
        assert_eq!(used.used, 0);
        assert!(take(&mut t, &mut used, 5).is_empty());
    }

    #[test]
    fn databases_are_kept_apart() {
        let (mut t, mut used) = table(64);
        for id in 0..20 {
            record(&mut t, &mut used, 1, 7, id, id * 10, 0);
            record(&mut t, &mut used, 2, 7, id, id * 10 + 1, 0);
        }
        record(&mut t, &mut used, 2, 7, 7, 1_000, 0);
        assert_eq!(pending(&t, 1), 20);
        assert_eq!(pending(&t, 2), 20);
        let one = take(&mut t, &mut used, 1);
        assert_eq!(one.len(), 20);
        assert!(one.windows(2).all(|w| w[0].id < w[1].id), "in id order");
        assert!(one.iter().all(|h| h.count == 1 && h.at == h.id * 10));
        // Database 2's slots are all still found after database 1's went.
        assert_eq!(used.used, 20);
        for id in 0..20 {
            assert_eq!(record(&mut t, &mut used, 2, 7, id, 0, 0), Recorded::Counted, "memory {id}");
        }
        let two = take(&mut t, &mut used, 2);
        assert_eq!(two.iter().find(|h| h.id == 7), Some(&Hit { id: 7, count: 3, at: 1_000, relation: 7, user: 0 }));
        assert!(two.iter().filter(|h| h.id != 7).all(|h| h.count == 2));
    }

    #[test]
    fn a_full_table_drops_new_memories_but_counts_known_ones() {
        let mut t = vec![Slot::default(); 8];
        let mut used = Usage::default();
        let added = (0..10).filter(|id| record(&mut t, &mut used, 3, 7, *id, 1, 0) == Recorded::Added).count();
        assert_eq!(added, limit(8));
        assert_eq!(record(&mut t, &mut used, 3, 7, 99, 1, 0), Recorded::Dropped);
        assert_eq!(record(&mut t, &mut used, 3, 7, 0, 5, 0), Recorded::Counted);
        let hits = take(&mut t, &mut used, 3);
        assert_eq!(hits.len(), limit(8));
        assert_eq!(hits[0], Hit { id: 0, count: 2, at: 5, relation: 7, user: 0 });
    }

    #[test]
    fn hits_put_back_merge_with_newer_ones() {
        let (mut t, mut used) = table(16);
        record(&mut t, &mut used, 9, 7, 1, 10, 0);
        record(&mut t, &mut used, 9, 7, 2, 10, 0);
        let taken = take(&mut t, &mut used, 9);
        record(&mut t, &mut used, 9, 7, 2, 50, 0);
        assert_eq!(put_back(&mut t, &mut used, 9, &taken), 0);
        assert_eq!(
            take(&mut t, &mut used, 9),
            vec![Hit { id: 1, count: 1, at: 10, relation: 7, user: 0 }, Hit { id: 2, count: 2, at: 50, relation: 7, user: 0 }]
        );
    }

    #[test]
    fn hits_of_a_table_that_is_gone_give_way_to_the_new_tables() {
        let (mut t, mut used) = table(16);
        record(&mut t, &mut used, 1, 7, 5, 10, 0);
        record(&mut t, &mut used, 1, 7, 5, 11, 0);
        assert_eq!(record(&mut t, &mut used, 1, 8, 5, 20, 0), Recorded::Counted);
        assert_eq!(take(&mut t, &mut used, 1), vec![Hit { id: 5, count: 1, at: 20, relation: 8, user: 0 }]);
    }

    #[test]
    fn an_empty_table_or_database_zero_records_nothing() {
        let mut used = Usage::default();
        assert_eq!(record(&mut [], &mut used, 1, 7, 1, 1, 0), Recorded::Dropped);
        let (mut t, mut used) = table(4);
        assert_eq!(record(&mut t, &mut used, 0, 7, 1, 1, 0), Recorded::Dropped);
        assert_eq!(used.used, 0);
    }

    #[test]
    fn many_ids_survive_a_take_of_another_database() {
        let (mut t, mut used) = table(10_000);
        for id in 0..10_000i64 {
            record(&mut t, &mut used, 1 + (id % 3) as u32, 7, id * 7919, id, (id % 1024) as u32);
        }
        let a = take(&mut t, &mut used, 2);
        assert_eq!(a.len(), 3_333);
        assert_eq!(pending(&t, 1) + pending(&t, 3), 10_000 - 3_333);
        let b = take(&mut t, &mut used, 1);
        let c = take(&mut t, &mut used, 3);
        assert_eq!(a.len() + b.len() + c.len(), 10_000);
        assert_eq!(used.used, 0);
    }

    #[test]
    fn no_user_takes_more_than_its_share() {
        let (mut t, mut used) = table(4096);
        let share = user_limit(t.len());
        assert!(share < limit(t.len()));
        let greedy = user_bucket("greedy-tenant");
        let added = (0..10_000).filter(|id| record(&mut t, &mut used, 1, 7, *id, 1, greedy) == Recorded::Added).count();
        assert_eq!(added, share, "the greedy user fills only its share");
        // A known memory of the greedy user is still counted; another user's new ones are added.
        assert_eq!(record(&mut t, &mut used, 1, 7, 0, 2, greedy), Recorded::Counted);
        let other = user_bucket("another-tenant");
        assert_ne!(other, greedy);
        assert!((20_000..20_100).all(|id| record(&mut t, &mut used, 1, 7, id, 1, other) == Recorded::Added));
        // A take frees the shares; what is put back counts again.
        let hits = take(&mut t, &mut used, 1);
        assert_eq!(used, Usage::default());
        assert_eq!(put_back(&mut t, &mut used, 1, &hits), 0);
        assert_eq!(used.by_user[greedy as usize] as usize, share);
        assert_eq!(used.by_user[other as usize], 100);
    }
}
