//! The calls Citus delegates, guarded before Citus plans them.
//!
//! Once `agent_memory.distribute()` has distributed the per-user functions, Citus's planner
//! sends a top-level `SELECT * FROM agent_memory.f('user', ...)` to the node that holds the
//! user. Citus 13.2.2 crashes the backend (SIGSEGV, every session of the server then ends)
//! on two shapes of such a call: a NULL user, and a user that is a column of another relation
//! of the statement (`FROM users u, LATERAL agent_memory.memory_recall(u.id, ...)`);
//! docs/scale-out.md has the stacks. This planner hook runs before Citus's (the library is
//! loaded after Citus: `shared_preload_libraries = 'citus,agent_memory'`) and refuses both,
//! for agent_memory's distributed functions only:
//!
//! - a NULL user (a constant, a bound parameter, or an expression that folds to NULL): 22004;
//! - a user taken from a column or a subquery: 0F000, the error of a call that does not run on its user's
//!   node ([`crate::placement::not_here`]), since Citus would not run it there anyway.
//!
//! Everything else goes to the planner unchanged. On one server, and before `distribute()`,
//! the hook looks at the function calls of a statement's target list and `FROM` list only.
#![allow(unsafe_code)]

use pgrx::pg_sys;
use pgrx::pg_sys::NodeTag;

use crate::error::{MemoryError, OrRaise, Result};

static mut PREV_PLANNER: pg_sys::planner_hook_type = None;

/// Installs the hook. Called once from `_PG_init`.
pub fn init() {
    // SAFETY: `_PG_init` runs once per process, before any statement is planned; the previous
    // hook is kept and called after this one.
    unsafe {
        PREV_PLANNER = pg_sys::planner_hook;
        pg_sys::planner_hook = Some(planner);
    }
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn planner(
    parse: *mut pg_sys::Query,
    query_string: *const std::ffi::c_char,
    cursor_options: std::ffi::c_int,
    bound_params: pg_sys::ParamListInfo,
) -> *mut pg_sys::PlannedStmt {
    if !parse.is_null() && (*parse).commandType == pg_sys::CmdType::CMD_SELECT {
        check(parse, bound_params).or_raise();
    }
    match PREV_PLANNER {
        Some(prev) => prev(parse, query_string, cursor_options, bound_params),
        None => pg_sys::standard_planner(parse, query_string, cursor_options, bound_params),
    }
}

/// The function calls Citus may take for a delegated one: the top-level expressions of the
/// target list, and the functions of the `FROM` list.
unsafe fn calls(parse: *mut pg_sys::Query) -> Vec<*mut pg_sys::FuncExpr> {
    let mut out = Vec::new();
    let targets = pgrx::PgList::<pg_sys::TargetEntry>::from_pg((*parse).targetList);
    for te in targets.iter_ptr() {
        let expr = (*te).expr as *mut pg_sys::Node;
        if !expr.is_null() && (*expr).type_ == NodeTag::T_FuncExpr {
            out.push(expr as *mut pg_sys::FuncExpr);
        }
    }
    let rtable = pgrx::PgList::<pg_sys::RangeTblEntry>::from_pg((*parse).rtable);
    for rte in rtable.iter_ptr() {
        if (*rte).rtekind != pg_sys::RTEKind::RTE_FUNCTION {
            continue;
        }
        let functions = pgrx::PgList::<pg_sys::RangeTblFunction>::from_pg((*rte).functions);
        for f in functions.iter_ptr() {
            let expr = (*f).funcexpr;
            if !expr.is_null() && (*expr).type_ == NodeTag::T_FuncExpr {
                out.push(expr as *mut pg_sys::FuncExpr);
            }
        }
    }
    out
}

unsafe fn check(parse: *mut pg_sys::Query, bound_params: pg_sys::ParamListInfo) -> Result<()> {
    let calls = calls(parse);
    if calls.is_empty() {
        return Ok(());
    }
    let namespace = pg_sys::get_namespace_oid(c"agent_memory".as_ptr(), true);
    if namespace == pg_sys::Oid::INVALID {
        return Ok(());
    }
    for call in calls {
        if pg_sys::get_func_namespace((*call).funcid) != namespace {
            continue;
        }
        let Some(index) = crate::placement::delegated_argument((*call).funcid)? else {
            continue;
        };
        let Some(arg) = argument(call, index) else {
            continue;
        };
        let name = std::ffi::CStr::from_ptr(pg_sys::get_func_name((*call).funcid)).to_string_lossy().into_owned();
        if is_null(arg, bound_params) {
            return Err(MemoryError::null_value(format!("agent_memory.{name}: user_id must not be NULL"))
                .hint("Pass the id of the user whose memories the call is for."));
        }
        if !pg_sys::contain_vars_of_level(arg, 0) && !pg_sys::contain_subplans(arg) {
            continue;
        }
        return Err(crate::placement::not_delegated(&format!("agent_memory.{name}")));
    }
    Ok(())
}

/// The argument at `index` of the call (by position, or named).
unsafe fn argument(call: *mut pg_sys::FuncExpr, index: usize) -> Option<*mut pg_sys::Node> {
    let args = pgrx::PgList::<pg_sys::Node>::from_pg((*call).args);
    for (position, arg) in args.iter_ptr().enumerate() {
        if arg.is_null() {
            continue;
        }
        if (*arg).type_ == NodeTag::T_NamedArgExpr {
            let named = arg as *mut pg_sys::NamedArgExpr;
            if (*named).argnumber as usize == index {
                return Some((*named).arg as *mut pg_sys::Node);
            }
        } else if position == index {
            return Some(arg);
        }
    }
    None
}

/// Whether `arg` is NULL before the statement runs: a NULL constant, a bound parameter that is
/// NULL, or an expression of constants that folds to NULL.
unsafe fn is_null(arg: *mut pg_sys::Node, bound_params: pg_sys::ParamListInfo) -> bool {
    let folded = pg_sys::eval_const_expressions(std::ptr::null_mut(), pg_sys::copyObjectImpl(arg.cast()).cast());
    if folded.is_null() {
        return false;
    }
    match (*folded).type_ {
        NodeTag::T_Const => (*(folded as *mut pg_sys::Const)).constisnull,
        NodeTag::T_Param => {
            let param = folded as *mut pg_sys::Param;
            if (*param).paramkind != pg_sys::ParamKind::PARAM_EXTERN || bound_params.is_null() {
                return false;
            }
            let id = (*param).paramid;
            if id < 1 || id > (*bound_params).numParams || (*bound_params).paramFetch.is_some() {
                return false;
            }
            let value = (*bound_params).params.as_slice((*bound_params).numParams as usize)[(id - 1) as usize];
            value.isnull
        }
        _ => false,
    }
}
