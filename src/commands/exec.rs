//! `band exec --band FILE -- CMD ARGS…`: run an ad-hoc command (code an agent wrote) under a band
//! file's policy ([`band::client::adhoc`]), and print the result like `band run`.

use anyhow::Result;

use crate::cli::exec::ExecArgs;
use crate::cli::progress::Spinner;
use crate::cli::render;
use crate::cli::trace;
use band::client::adhoc::{AdHoc, AdHocSpec};
use band::client::pipeline;
use band::proto::{self, Status};

pub(crate) fn cmd_exec(args: ExecArgs) -> Result<u8> {
    // As root on Linux, band-server starts now (if `main` did not already), while band checks the
    // band file and prepares the run, as for `band run` (issue 17). A command the band refuses
    // closes it unused.
    let early = super::run::take_early()
        .unwrap_or_else(|| pipeline::Early::guess(args.common.exec_target.as_deref()));
    let adhoc = AdHoc::new(&AdHocSpec {
        band_file: args.band.clone(),
        argv: args.command.clone(),
        workspace: args.common.workspace(),
        allow_system_workspace: args.common.allow_system_workspace,
        target: args.common.exec_target.clone(),
        record_io: args.record_io,
        trace: args.common.trace,
    })?;
    let human = !args.common.json;
    crate::cli::progress::cancel_on_signals();
    let spinner = Spinner::start(
        args.common.json,
        format!("running {} under {}", args.command[0], args.band.display()),
    );
    let mut live = render::Live::default();
    let outcome = adhoc.run(early, &mut |ev| {
        if human {
            spinner.suspend(|| show_event(&mut live, ev))
        }
    });
    spinner.finish();
    live.end_with(outcome.as_ref().ok().map(|o| &o.result));
    let outcome = outcome?;
    let result = &outcome.result;
    if args.common.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&render::result_json(&outcome)?)?
        );
    } else {
        if args.common.trace {
            let allow_cli = band::skill::resolve_band_file(&args.band)
                .0
                .map(|r| r.policy.allow.cli)
                .unwrap_or_default();
            render::say(&trace::render(result, &allow_cli, &[]));
        }
        for w in &outcome.secret_warnings {
            eprintln!("band: warning: {w}");
        }
        render::warn_forged(result);
        if result.status != Status::Ok {
            render::print_failure(result);
        }
        if let Some(note) = render::links_note(&outcome.links_left_out) {
            render::say(&note);
        }
        if let Some(note) = render::missing_note(result) {
            render::say(&note);
        }
        if let Some(hint) = render::listening_hint(result) {
            render::say(&hint);
        }
    }
    Ok(result.status.exit_code())
}

fn show_event(live: &mut render::Live, ev: &proto::Event) {
    match ev {
        // The command's own output, as it comes.
        proto::Event::Stdout { data } => render::stream_stdout(data),
        other => live.event(other),
    }
}
