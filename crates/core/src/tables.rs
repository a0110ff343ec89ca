//! The tables a statement names, renamed: a maintenance pass runs the same statements on
//! another set of tables (on a Citus node, the shards of one colocation group) by naming them
//! in place of the extension's own.

/// The extension's tables that hold one user's rows, each keyed by `user_id` first.
pub const PER_USER: [&str; 7] =
    ["memories", "turns", "tasks", "predicate_declarations", "memory_packs", "memory_pack_users", "memory_pack_stale"];

/// `sql` with every `agent_memory.<table>` of [`PER_USER`] replaced by `names[i]` (already
/// qualified and quoted as they should be written). A name counts only whole: `agent_memory.memories`
/// is not a prefix of `agent_memory.memories_x`.
pub fn rename(sql: &str, names: &[String; 7]) -> String {
    const SCHEMA: &str = "agent_memory.";
    let mut out = String::with_capacity(sql.len() + 64);
    let mut rest = sql;
    while let Some(at) = rest.find(SCHEMA) {
        let before_ok = at == 0 || !is_word(rest.as_bytes()[at - 1]);
        let after = &rest[at + SCHEMA.len()..];
        let table = PER_USER
            .iter()
            .enumerate()
            .filter(|(_, t)| after.starts_with(*t) && after.as_bytes().get(t.len()).is_none_or(|&b| !is_word(b)))
            .max_by_key(|(_, t)| t.len());
        match table {
            Some((i, t)) if before_ok => {
                out.push_str(&rest[..at]);
                out.push_str(&names[i]);
                rest = &after[t.len()..];
            }
            _ => {
                out.push_str(&rest[..at + SCHEMA.len()]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shards() -> [String; 7] {
        PER_USER.map(|t| format!("agent_memory.{t}_102008"))
    }

    #[test]
    fn every_per_user_table_is_renamed_whole() {
        let sql = "DELETE FROM agent_memory.memory_pack_stale s WHERE NOT EXISTS \
                   (SELECT 1 FROM agent_memory.memories m WHERE m.user_id = s.user_id) \
                   AND EXISTS (SELECT 1 FROM agent_memory.memory_packs p, agent_memory.memory_pack_users u)";
        assert_eq!(
            rename(sql, &shards()),
            "DELETE FROM agent_memory.memory_pack_stale_102008 s WHERE NOT EXISTS \
             (SELECT 1 FROM agent_memory.memories_102008 m WHERE m.user_id = s.user_id) \
             AND EXISTS (SELECT 1 FROM agent_memory.memory_packs_102008 p, agent_memory.memory_pack_users_102008 u)"
        );
    }

    #[test]
    fn shared_tables_functions_and_longer_names_stay() {
        let sql = "SELECT agent_memory.memory_retention(m.kind), s.salt FROM agent_memory.lock_salt s, \
                   agent_memory.memories_user_model_active x, my_agent_memory.memories y, agent_memory.turns";
        assert_eq!(
            rename(sql, &shards()),
            "SELECT agent_memory.memory_retention(m.kind), s.salt FROM agent_memory.lock_salt s, \
             agent_memory.memories_user_model_active x, my_agent_memory.memories y, agent_memory.turns_102008"
        );
    }

    #[test]
    fn the_extension_own_names_give_the_same_text() {
        let sql = "UPDATE agent_memory.memories m SET x = 1 FROM agent_memory.tasks t";
        assert_eq!(rename(sql, &PER_USER.map(|t| format!("agent_memory.{t}"))), sql);
    }
}
