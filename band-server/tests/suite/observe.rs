//! `band learn`'s observing runs (`observe: true`), and refusals that used to vanish: a write
//! outside `allow.write`, and `allow.write: out/` creating `out/`.

use band::proto::{Denial, Event, Observed};

use super::helpers::{file, policy, privileged, request, run, strs};

#[test]
fn privileged_observe_records_the_workspace_files_read_and_written_and_nothing_else() {
    privileged!();
    let mut p = policy();
    p.allow.read = strs(&["**"]);
    p.allow.write = strs(&["out/**"]);
    // A shell redirection (no exec the gate could see), a read by an essential command, a write,
    // and one file never touched.
    let mut req = request(
        "#!/bin/sh\nread line < notes.txt\ncat data/in.csv > /dev/null\nmkdir -p out\necho \"$line\" > out/r.md\necho ok\n",
        p,
    );
    req.observe = true;
    req.workspace = vec![
        file("notes.txt", 0o644, b"hello\n"),
        file("data/in.csv", 0o644, b"a,b\n"),
        file("data/untouched.csv", 0o644, b"c,d\n"),
    ];
    let out = run(&req);
    assert_eq!(out.stdout().trim(), "ok", "{out:?}");
    assert_eq!(
        out.result.observed,
        Some(Observed {
            reads: strs(&["data/in.csv", "notes.txt"]),
            writes: strs(&["out/r.md"]),
            complete: true,
        }),
        "{out:?}"
    );
}

#[test]
fn privileged_without_observe_nothing_is_observed() {
    privileged!();
    let mut p = policy();
    p.allow.read = strs(&["**"]);
    let mut req = request("#!/bin/sh\ncat notes.txt\n", p);
    req.workspace = vec![file("notes.txt", 0o644, b"hello\n")];
    let out = run(&req);
    assert_eq!(out.stdout().trim(), "hello", "{out:?}");
    assert_eq!(out.result.observed, None);
}

#[test]
fn privileged_a_write_outside_allow_write_is_a_denial_not_silence() {
    privileged!();
    let mut p = policy();
    // `*.json` makes the workspace root writable; `notes.txt` is not admitted.
    p.allow.write = strs(&["*.json"]);
    let req = request(
        "#!/bin/sh\necho '{}' > a.json\necho secret > notes.txt\necho done\n",
        p,
    );
    let out = run(&req);
    assert_eq!(out.stdout().trim(), "done", "{out:?}");
    let want = Denial::Write {
        path: "notes.txt".into(),
        rule: None,
    };
    assert!(out.result.denied.contains(&want), "{out:?}");
    assert!(
        out.events.contains(&Event::Denied(want.clone())),
        "{:?}",
        out.events
    );
    assert_eq!(
        want.smallest_rule(),
        Some(("allow.write", "./notes.txt".to_string()))
    );
    let written: Vec<&str> = out.result.written.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(written, ["a.json"]);
}

#[test]
fn privileged_allow_write_of_a_directory_creates_it() {
    privileged!();
    let mut p = policy();
    p.allow.write = strs(&["out/"]);
    // No mkdir: the directory is there because the band names it.
    let req = request("#!/bin/sh\necho x > out/a.txt && echo wrote\n", p);
    let out = run(&req);
    assert_eq!(out.stdout().trim(), "wrote", "{out:?}");
    let written: Vec<&str> = out.result.written.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(written, ["out/a.txt"]);
}
