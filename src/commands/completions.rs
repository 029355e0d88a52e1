//! `band completions <shell>` and `band man`: generated from the same clap definition as the
//! command line itself (clap_complete, clap_mangen), so they cannot drift from it.

use anyhow::{Context, Result};
use clap::CommandFactory;

use crate::cli::render::write_stdout;
use crate::cli::{Cli, CompletionsArgs, ManArgs};
use band::proto::exit;

pub(crate) fn cmd_completions(args: CompletionsArgs) -> Result<u8> {
    let mut command = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "band", &mut script);
    let mut text = String::from_utf8_lossy(&script).into_owned();
    if args.shell == clap_complete::Shell::Bash {
        text.push_str(&bash_values(&command));
    }
    write_stdout(&text)?;
    Ok(exit::OK)
}

/// What clap's static bash script cannot know, added around its `_band`: the skills' and
/// scripts' names (`band list --names`, on the skills path the line's own `--skills` give) where
/// a `<skill>/<script>` goes (the first word, or the first argument of run, help, explain and
/// learn), and the values of `--target` and `--status`.
fn bash_values(command: &clap::Command) -> String {
    let statuses: Vec<&str> = band::proto::Status::ALL
        .iter()
        .map(|s| s.as_str())
        .collect();
    // The options that take a value: the word after one is its value, never a skill.
    let mut valued = std::collections::BTreeSet::new();
    let mut commands = vec![command];
    while let Some(c) = commands.pop() {
        for a in c.get_arguments() {
            if let Some(long) = a.get_long()
                && a.get_action().takes_values()
            {
                valued.insert(format!("--{long}"));
            }
        }
        commands.extend(c.get_subcommands());
    }
    let valued: Vec<String> = valued.into_iter().collect();
    format!(
        r#"
_band_values() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    case "$prev" in
        --target)
            COMPREPLY=($(compgen -W "{targets}" -- "$cur"))
            return 0
            ;;
        --status)
            COMPREPLY=($(compgen -W "{statuses}" -- "$cur"))
            return 0
            ;;
    esac
    _band "$@"
    [[ "$cur" == -* ]] && return 0
    case "$prev" in
        {valued}) return 0 ;;
    esac
    # The words before this one that are not options or their values: none, or one of the
    # commands that take a `<skill>/<script>`, and a name goes here.
    local i=1 word positional=() skills=()
    while ((i < COMP_CWORD)); do
        word="${{COMP_WORDS[i]}}"
        case "$word" in
            --) return 0 ;;
            --skills) skills+=(--skills "${{COMP_WORDS[i+1]}}"); ((i += 2)); continue ;;
            --skills=*) skills+=("$word") ;;
            {valued}) ((i += 2)); continue ;;
            -*) ;;
            *) positional+=("$word") ;;
        esac
        ((i++))
    done
    case "${{positional[*]}}" in
        ""|run|help|explain|learn) ;;
        *) return 0 ;;
    esac
    local names
    names="$("${{COMP_WORDS[0]}}" list --names "${{skills[@]}}" 2>/dev/null)"
    COMPREPLY+=($(compgen -W "$names" -- "$cur"))
    return 0
}}
if [[ "${{BASH_VERSINFO[0]}}" -eq 4 && "${{BASH_VERSINFO[1]}}" -ge 4 || "${{BASH_VERSINFO[0]}}" -gt 4 ]]; then
    complete -F _band_values -o nosort -o bashdefault -o default band
else
    complete -F _band_values -o bashdefault -o default band
fi
"#,
        targets = "host qemu lima ssh://",
        statuses = statuses.join(" "),
        valued = valued.join("|")
    )
}

pub(crate) fn cmd_man(args: ManArgs) -> Result<u8> {
    let command = Cli::command();
    match args.dir {
        Some(dir) => {
            fs_err::create_dir_all(&dir)?;
            clap_mangen::generate_to(command, &dir)
                .with_context(|| format!("cannot write the manual pages to {}", dir.display()))?;
            eprintln!("band: wrote the manual pages to {}", dir.display());
        }
        None => {
            let mut page = Vec::new();
            clap_mangen::Man::new(command)
                .render(&mut page)
                .context("cannot render the manual page")?;
            write_stdout(&String::from_utf8_lossy(&page))?;
        }
    }
    Ok(exit::OK)
}
