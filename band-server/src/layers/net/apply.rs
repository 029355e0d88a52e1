//! Apply the network's plan: the run's nftables table, its network namespace with the relay,
//! and its DNS stub, when the band allows any host (without `allow.net` nothing is built:
//! bubblewrap gives the run a network namespace with only loopback). Two steps: the table and
//! the namespace with its relay started, before bubblewrap (which joins the namespace); then the
//! wait for the relay and the stub's start, after bubblewrap's spawn and before the jail's input
//! is written (so before the script).

use std::time::Instant;

use band::proto::Layer;

use super::NetLayer;
use super::nft::Nft;
use crate::error::{SetupError, SetupResult};
use crate::layer::RunGuard;
use crate::layer::handover::{NetNamespace, Spawned};
use crate::layer::{Applied, Inputs};

/// The network step of layer's steps ([`crate::layer::RunLayer::steps`]).
pub(crate) fn table_and_stub(
    inp: &Inputs<'_>,
    out: &mut Applied,
    guard: &mut RunGuard,
) -> SetupResult<()> {
    let Some(net_plan) = &inp.plan.net else {
        return Ok(());
    };
    let layer = NetLayer::start(
        net_plan,
        &Nft::new(&inp.cfg.nft),
        &inp.cfg.slirp4netns,
        out.on_lookup.clone(),
    )
    .map_err(failed)?;
    if let Some(fd) = layer.netns_fd() {
        out.parts.insert(NetNamespace(fd));
    }
    guard.push(layer);
    Ok(())
}

/// The network's wait step ([`crate::layer::Phase::Ready`]): the relay up and the stub serving,
/// before the jail's input is written. The script's clock starts after the wait.
pub(crate) fn ready(_inp: &Inputs<'_>, out: &mut Applied, guard: &mut RunGuard) -> SetupResult<()> {
    let Some(layer) = guard.get_mut::<NetLayer>() else {
        return Ok(());
    };
    layer.wait_ready().map_err(failed)?;
    if let Some(mut spawned) = out.parts.remove::<Spawned>() {
        spawned.run_start = Instant::now();
        out.parts.insert(spawned);
    }
    Ok(())
}

fn failed(e: super::NetError) -> SetupError {
    SetupError::new(Layer::Network, e.to_string())
        .with_hint("the network layer needs nftables and slirp4netns (apt-get install nftables slirp4netns), user namespaces, and a resolver in /etc/resolv.conf or dns_upstream in the server config")
}
