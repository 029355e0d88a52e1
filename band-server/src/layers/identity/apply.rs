//! Apply the identity: lease a pool uid. Unlike the other layers' steps this runs before the
//! plan (which needs the uid), so `run::apply` does not call it: the run's `prepare` does,
//! between the preflight and `plan_run`.

use super::uidpool::{self, OnDeadLease, WhenFull};
use crate::common::RunGuard;
use crate::common::handover::Identity;
use crate::config::ServerConfig;
use crate::error::SetupResult;
use crate::layer::RunLayer;

/// Lease a pool uid for `run_id` and keep the lease in the guard. A lease whose owner died
/// mid-run is cleaned first by `on_dead` (the runner passes the janitor's cleanup of a dead
/// lease: the janitor sits above the layers), which says whether it left nothing behind.
/// `when_full`: whether to wait for a uid when all are leased.
pub(crate) fn lease(
    cfg: &ServerConfig,
    run_id: &str,
    guard: &mut RunGuard,
    on_dead: OnDeadLease<'_>,
    when_full: WhenFull<'_>,
) -> SetupResult<Identity> {
    let lease = uidpool::acquire(&cfg.state_dir, run_id, on_dead, when_full)?;
    let identity = Identity {
        slot: lease.slot,
        uid: lease.uid,
        gid: lease.gid,
        user: lease.user.clone(),
    };
    guard.push(lease);
    Ok(identity)
}

impl RunLayer for super::Identity {}
