//! Apply the network's plan: the run's nftables table, its network namespace with the relay,
//! and its DNS stub, when the band allows any host (without `allow.net` nothing is built:
//! bubblewrap gives the run a network namespace with only loopback). Two steps: the table and
//! the namespace with its relay started, before bubblewrap (which joins the namespace); then the
//! wait for the relay and the stub's start, after bubblewrap's spawn and before the jail's input
//! is written (so before the script).

use std::collections::BTreeSet;
use std::sync::Arc;

use band::proto::Layer;

use super::NetLayer;
use super::nft::Nft;
use super::{Net, nft, remove_stale_tables};
use crate::common::handover::{NetNamespace, OnLookup};
use crate::common::{Held, RunGuard};
use crate::error::{SetupError, SetupResult};
use crate::layer::{Inputs, RunLayer};

/// The run's network, started ([`table_and_relay`]): its handle, for the wait and the run loop
/// (which watches its table and reads what it saw), and its namespace, for the spawn.
pub(crate) struct NetStarted {
    pub(crate) layer: Held<NetLayer>,
    pub(crate) netns: Option<NetNamespace>,
}

/// The network's first step, before the spawn (bubblewrap joins the namespace): the nftables
/// table, and the network namespace with its relay started. Nothing without `allow.net`.
pub(crate) fn table_and_relay(
    inp: &Inputs<'_>,
    on_lookup: Arc<OnLookup>,
    guard: &mut RunGuard,
) -> SetupResult<Option<NetStarted>> {
    let Some(net_plan) = &inp.plan.net else {
        return Ok(None);
    };
    let layer = NetLayer::start(
        net_plan,
        &Nft::new(&inp.cfg.nft),
        &inp.cfg.slirp4netns,
        on_lookup,
        inp.plan.egress.clone(),
    )
    .map_err(failed)?;
    let netns = layer.netns_fd().map(NetNamespace);
    Ok(Some(NetStarted {
        layer: guard.push(layer),
        netns,
    }))
}

/// The network's wait step, after the spawn: the relay up and the stub serving, before the
/// jail's input is written (the run starts the script's clock after it).
pub(crate) fn ready(net: &Held<NetLayer>, guard: &mut RunGuard) -> SetupResult<()> {
    let layer = guard.get_mut(net).ok_or_else(|| {
        SetupError::new(
            Layer::Network,
            "internal: the network was torn down before its wait",
        )
    })?;
    layer.wait_ready().map_err(failed)
}

fn failed(e: super::NetError) -> SetupError {
    SetupError::new(Layer::Network, e.to_string())
        .with_hint("the network layer needs nftables and slirp4netns (apt-get install nftables slirp4netns), user namespaces, and a resolver in /etc/resolv.conf or dns_upstream in the server config")
}

impl RunLayer for Net {
    fn list_stale(
        &self,
        host: &crate::common::Host<'_>,
        report: &mut crate::common::Report,
    ) -> Vec<crate::common::Stale> {
        // Listed only by the `janitor` command.
        let nft = host.nft.filter(|_| host.scan_tables).map(Nft::new);
        match nft.as_ref().map(Nft::list_tables) {
            Some(Ok(tables)) => tables.into_iter().map(crate::common::Stale::run).collect(),
            Some(Err(e)) => {
                report.errors.push(format!("nft: {e}"));
                Vec::new()
            }
            None => Vec::new(),
        }
    }

    fn remove_dead_run(
        &self,
        host: &crate::common::Host<'_>,
        run: &str,
        report: &mut crate::common::Report,
    ) {
        // Its processes are dead: the run's table (if it had network) can go.
        if let Some(nft) = host.nft.map(Nft::new) {
            let table = nft::table_name(run);
            if nft.list_table(&table).is_ok() {
                match nft.delete_table(&table) {
                    Ok(()) => report.note_removed(crate::common::REMOVED_TABLES, table),
                    Err(e) => report.errors.push(e.to_string()),
                }
            }
        }
    }

    fn remove_stale(
        &self,
        host: &crate::common::Host<'_>,
        item: &crate::common::Stale,
        live: &BTreeSet<String>,
        report: &mut crate::common::Report,
    ) {
        let Some(nft) = host.nft.filter(|_| host.scan_tables).map(Nft::new) else {
            return;
        };
        // Listed before the leases were read: a dead lease's table is gone by now.
        if report
            .removed(crate::common::REMOVED_TABLES)
            .contains(&item.run)
        {
            return;
        }
        let (removed, errors) = remove_stale_tables(&nft, std::slice::from_ref(&item.run), live);
        for t in removed {
            if !report.removed(crate::common::REMOVED_TABLES).contains(&t) {
                report.note_removed(crate::common::REMOVED_TABLES, t);
            }
        }
        report.errors.extend(errors);
    }
}
