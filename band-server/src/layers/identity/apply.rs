//! Apply the identity: lease a pool uid. Unlike the other layers' steps this runs before the
//! plan (which needs the uid), so it has no [`crate::layer::Step`]; `run::execute` calls it
//! between the preflight and `plan_run`.

use std::path::Path;

use super::uidpool;
use crate::config::ServerConfig;
use crate::error::SetupResult;
use crate::plan::Identity;
use crate::run::RunGuard;

/// Lease a pool uid for `run_id` and keep the lease in the guard. A lease whose owner died
/// mid-run is cleaned first. (The janitor pass before every run already did this with the
/// configured nft; a lease that died since is cleaned here with the default one.)
pub fn lease(cfg: &ServerConfig, run_id: &str, guard: &mut RunGuard) -> SetupResult<Identity> {
    let on_dead = |slot: u32, file: &mut fs_err::File| {
        let nft = Path::new(crate::config::DEFAULT_NFT);
        let report = crate::janitor::clean_dead_lease(
            &cfg.state_dir,
            slot,
            file,
            nft.is_file().then_some(nft),
        );
        report.errors.is_empty()
    };
    let lease = uidpool::acquire(&cfg.state_dir, run_id, &on_dead)?;
    let identity = Identity {
        slot: lease.slot,
        uid: lease.uid,
        gid: lease.gid,
        user: lease.user.clone(),
    };
    guard.push(lease);
    Ok(identity)
}
