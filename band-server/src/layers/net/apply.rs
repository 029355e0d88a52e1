//! Apply the network's plan: the run's nftables table, its network namespace with the relay,
//! and its DNS stub, when the band allows any host (without `allow.net` nothing is built:
//! bubblewrap gives the run a network namespace with only loopback).

use band::proto::Layer;

use super::NetLayer;
use super::nft::Nft;
use crate::error::{SetupError, SetupResult};
use crate::layer::{Applied, Inputs};
use crate::run::RunGuard;

/// The network step of layer's steps ([`crate::layer::RunLayer::steps`]).
pub(crate) fn table_and_stub(
    inp: &Inputs<'_>,
    out: &mut Applied,
    guard: &mut RunGuard,
) -> SetupResult<()> {
    let part: &Option<super::NetRunPlan> = inp.plan.parts.need(Layer::Network)?;
    let Some(net_plan) = part else {
        return Ok(());
    };
    let layer = NetLayer::setup(
        net_plan,
        &Nft::new(&inp.cfg.nft),
        &inp.cfg.slirp4netns,
        out.on_lookup.clone(),
    )
    .map_err(|e| {
        SetupError::new(Layer::Network, e.to_string())
            .with_hint("the network layer needs nftables and slirp4netns (apt-get install nftables slirp4netns), user namespaces, and a resolver in /etc/resolv.conf or dns_upstream in the server config")
    })?;
    guard.push(layer);
    Ok(())
}
