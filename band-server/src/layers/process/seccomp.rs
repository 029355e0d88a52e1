//! The seccomp filter every skill process runs under.
//!
//! Three layers, in the order the data flows:
//!
//! 1. [`denied_syscalls`]: the policy as data. One [`DeniedSyscall`] per syscall, with the errno
//!    it gets, the argument conditions (if any) and a one-line reason that `band explain` shows.
//! 2. [`build_program`]: a pure function from that data to a classic-BPF program. It compiles one
//!    `seccompiler` filter per distinct errno, chains them, and puts a hand-written x32 guard in
//!    front on x86_64.
//! 3. [`install`]: a thin wrapper around `seccompiler::apply_filter` for the calling thread.
//!
//! The default action is *allow*: this is a deny list of kernel attack surface and sandbox-escape
//! primitives, layered under the namespaces, the per-run UID and the cgroup, not the only fence.

use std::collections::BTreeMap;

use seccompiler::{
    BackendError, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition,
    SeccompFilter, SeccompRule, TargetArch, sock_filter,
};
use serde::{Deserialize, Serialize};

/// A comparison on one syscall argument. Only the low 32 bits are compared (seccompiler's
/// `Dword`): every argument this policy inspects is an `int` or is truncated to 32 bits by the
/// kernel (`clone` flags, `personality`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ArgOp {
    /// `arg == value`
    Eq(u32),
    /// `arg != value`
    Ne(u32),
    /// `arg & mask == value & mask`
    MaskedEq { mask: u32, value: u32 },
}

/// One condition on argument `index` (0-based) of a syscall.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArgCond {
    pub(crate) index: u8,
    pub(crate) op: ArgOp,
}

/// One entry of the deny list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeniedSyscall {
    /// The syscall's name without the `SYS_` prefix, e.g. `ptrace`.
    pub name: &'static str,
    /// The syscall number on the host architecture (`libc::SYS_*`).
    pub(crate) nr: i64,
    /// The errno the call fails with (`EPERM`, or `ENOSYS` to make libc fall back).
    pub errno: u32,
    /// One line, shown by `band explain`.
    pub(crate) reason: &'static str,
    /// When the call is denied. Empty: always. Otherwise the call is denied when every condition
    /// of at least one inner list holds, and allowed when none does.
    pub when: Vec<Vec<ArgCond>>,
}

/// Errors from building or installing the filter.
#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    #[error("syscall {name} (nr {nr}) is listed twice in the seccomp deny list")]
    Duplicate { name: &'static str, nr: i64 },
    #[error("invalid seccomp rule for {name}: {error}")]
    Rule {
        name: &'static str,
        error: BackendError,
    },
    #[error("failed to compile the seccomp filter for errno {errno}: {error}")]
    Compile { errno: u32, error: BackendError },
    #[error("the seccomp program has {len} instructions; the kernel accepts at most {max}")]
    TooLarge { len: usize, max: usize },
    #[error("failed to install the seccomp filter: {error}")]
    Install { error: seccompiler::Error },
}

const EPERM: u32 = libc::EPERM as u32;
const ENOSYS: u32 = libc::ENOSYS as u32;

/// Namespace flags for `clone(2)`. `CLONE_NEWTIME` (0x80) shares bits with the exit-signal byte
/// of `clone`'s flags, so the kernel rejects it there anyway (signal 128+ is invalid); it is
/// listed so the rule covers every namespace `unshare`/`clone3` know.
const CLONE_NAMESPACE_FLAGS: [(&str, i32); 8] = [
    ("CLONE_NEWNS", libc::CLONE_NEWNS),
    ("CLONE_NEWUTS", libc::CLONE_NEWUTS),
    ("CLONE_NEWIPC", libc::CLONE_NEWIPC),
    ("CLONE_NEWUSER", libc::CLONE_NEWUSER),
    ("CLONE_NEWPID", libc::CLONE_NEWPID),
    ("CLONE_NEWNET", libc::CLONE_NEWNET),
    ("CLONE_NEWCGROUP", libc::CLONE_NEWCGROUP),
    ("CLONE_NEWTIME", libc::CLONE_NEWTIME),
];

/// `SOCK_TYPE_MASK` from the kernel: the socket type without `SOCK_NONBLOCK`/`SOCK_CLOEXEC`.
const SOCK_TYPE_MASK: u32 = 0xf;
/// Obsolete `(AF_INET, SOCK_PACKET)`; the kernel silently turns it into an `AF_PACKET` socket.
const SOCK_PACKET: i32 = 10;
/// `personality(0xffffffff)` only queries the current persona.
const PERSONALITY_QUERY: u32 = 0xffff_ffff;
/// The default persona (linux/personality.h); libc does not export it.
const PER_LINUX: u32 = 0;

/// `(name, nr)` from a `libc::SYS_*` constant, so the name can never disagree with the number.
macro_rules! sys {
    ($sys:ident) => {
        (stringify!($sys).trim_start_matches("SYS_"), libc::$sys)
    };
}

fn deny(sys: (&'static str, i64), reason: &'static str) -> DeniedSyscall {
    DeniedSyscall {
        name: sys.0,
        nr: sys.1,
        errno: EPERM,
        reason,
        when: Vec::new(),
    }
}

fn deny_when(
    sys: (&'static str, i64),
    reason: &'static str,
    when: Vec<Vec<ArgCond>>,
) -> DeniedSyscall {
    DeniedSyscall {
        when,
        ..deny(sys, reason)
    }
}

fn arg(index: u8, op: ArgOp) -> ArgCond {
    ArgCond { index, op }
}

/// `int` constants from libc as the 32-bit value the kernel sees.
fn u(value: i32) -> u32 {
    value as u32
}

/// What the deny list depends on, per run. band-server decides it and sends it to band-jail
/// through the secrets pipe (`bwrap::JailInput`); the default is the strictest list.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// The run has `allow.net` (its own network namespace, relayed; see `layers::net::netns`):
    /// `NETLINK_ROUTE` sockets stay allowed, since glibc's `getaddrinfo` (`AI_ADDRCONFIG`) and
    /// `getifaddrs` use them; they show only the run's own `lo` and `tap0`. Without it every
    /// netlink socket is denied.
    #[serde(default)]
    pub(crate) share_net: bool,
    /// The kernel has no `vm.memfd_noexec` (before 6.3), so band-server could not make the run's
    /// memfds non-executable: `memfd_create` is denied outright (ENOSYS, so programs fall back
    /// to files), closing "exec what I just wrote into a memfd".
    #[serde(default)]
    pub(crate) deny_memfd: bool,
}

/// `AF_NETLINK` protocol `NETLINK_ROUTE` (linux/netlink.h).
const NETLINK_ROUTE: u32 = 0;
/// `MFD_EXEC` (linux/memfd.h, 6.3+): asks for an executable memfd.
const MFD_EXEC: u32 = 0x10;

/// The deny list for the host architecture (x86_64 or aarch64).
pub(crate) fn denied_syscalls(profile: Profile) -> Vec<DeniedSyscall> {
    let raw_type = |domain: i32| {
        vec![
            arg(0, ArgOp::Eq(u(domain))),
            arg(
                1,
                ArgOp::MaskedEq {
                    mask: SOCK_TYPE_MASK,
                    value: u(libc::SOCK_RAW),
                },
            ),
        ]
    };
    let clone_namespaces = CLONE_NAMESPACE_FLAGS
        .iter()
        .map(|&(_, flag)| {
            vec![arg(
                0,
                ArgOp::MaskedEq {
                    mask: u(flag),
                    value: u(flag),
                },
            )]
        })
        .collect();

    let mut netlink = vec![vec![arg(0, ArgOp::Eq(u(libc::AF_NETLINK)))]];
    if profile.share_net {
        netlink = vec![vec![
            arg(0, ArgOp::Eq(u(libc::AF_NETLINK))),
            arg(2, ArgOp::Ne(NETLINK_ROUTE)),
        ]];
    }
    let socket_rules = [
        vec![
            vec![arg(0, ArgOp::Eq(u(libc::AF_PACKET)))],
            vec![arg(0, ArgOp::Eq(u(libc::AF_VSOCK)))],
            raw_type(libc::AF_INET),
            raw_type(libc::AF_INET6),
            vec![
                arg(0, ArgOp::Eq(u(libc::AF_INET))),
                arg(
                    1,
                    ArgOp::MaskedEq {
                        mask: SOCK_TYPE_MASK,
                        value: u(SOCK_PACKET),
                    },
                ),
            ],
        ],
        netlink,
    ]
    .concat();
    let memfd = if profile.deny_memfd {
        DeniedSyscall {
            errno: ENOSYS,
            ..deny(
                sys!(SYS_memfd_create),
                "this kernel cannot make memfds non-executable (vm.memfd_noexec, 6.3+): no memfds",
            )
        }
    } else {
        deny_when(
            sys!(SYS_memfd_create),
            "an executable memfd (MFD_EXEC) would run bytes the script wrote",
            vec![vec![arg(
                1,
                ArgOp::MaskedEq {
                    mask: MFD_EXEC,
                    value: MFD_EXEC,
                },
            )]],
        )
    };

    let mut list = vec![
        // Other processes.
        deny(
            sys!(SYS_ptrace),
            "tracing another process reads and rewrites its memory",
        ),
        deny(sys!(SYS_process_vm_readv), "reads another process's memory"),
        deny(
            sys!(SYS_process_vm_writev),
            "writes another process's memory",
        ),
        deny(
            sys!(SYS_pidfd_getfd),
            "copies a descriptor out of another process",
        ),
        // The filesystem view built by the sandbox.
        deny(
            sys!(SYS_mount),
            "mounting changes the filesystem view the sandbox built",
        ),
        deny(
            sys!(SYS_umount2),
            "unmounting could uncover paths the sandbox hid",
        ),
        deny(
            sys!(SYS_pivot_root),
            "changes the root of the mount namespace",
        ),
        deny(
            sys!(SYS_move_mount),
            "new mount API: moves mounts in the sandbox's view",
        ),
        deny(sys!(SYS_open_tree), "new mount API: clones mount trees"),
        deny(
            sys!(SYS_fsopen),
            "new mount API: creates a filesystem context",
        ),
        deny(
            sys!(SYS_fsmount),
            "new mount API: turns a filesystem context into a mount",
        ),
        deny(
            sys!(SYS_fsconfig),
            "new mount API: configures a filesystem context",
        ),
        deny(
            sys!(SYS_fspick),
            "new mount API: reconfigures an existing mount",
        ),
        deny(
            sys!(SYS_mount_setattr),
            "changes mount flags such as read-only or nosuid",
        ),
        deny(
            sys!(SYS_open_by_handle_at),
            "opens files by handle, bypassing path checks (the shocker escape)",
        ),
        deny(
            sys!(SYS_name_to_handle_at),
            "produces file handles for open_by_handle_at",
        ),
        // Namespaces.
        deny(
            sys!(SYS_unshare),
            "new namespaces would escape the sandbox's view and limits",
        ),
        deny(
            sys!(SYS_setns),
            "joining another namespace escapes the sandbox",
        ),
        deny_when(
            sys!(SYS_clone),
            "clone with a namespace flag creates namespaces, like unshare",
            clone_namespaces,
        ),
        DeniedSyscall {
            errno: ENOSYS,
            ..deny(
                sys!(SYS_clone3),
                "clone3 flags live in memory seccomp cannot inspect; ENOSYS makes libc use clone",
            )
        },
        // Kernel attack surface.
        deny(
            sys!(SYS_keyctl),
            "the kernel keyring is shared outside the sandbox",
        ),
        deny(
            sys!(SYS_add_key),
            "the kernel keyring is shared outside the sandbox",
        ),
        deny(
            sys!(SYS_request_key),
            "the kernel keyring is shared outside the sandbox",
        ),
        deny(sys!(SYS_bpf), "eBPF is a large kernel attack surface"),
        deny(
            sys!(SYS_perf_event_open),
            "perf events leak kernel and other processes' state",
        ),
        deny(
            sys!(SYS_userfaultfd),
            "userfaultfd makes kernel race exploits reliable",
        ),
        deny(
            sys!(SYS_io_setup),
            "kernel AIO contexts are counted host-wide (fs.aio-max-nr): one run could take them all",
        ),
        deny(
            sys!(SYS_io_uring_setup),
            "io_uring is a large kernel attack surface",
        ),
        deny(
            sys!(SYS_io_uring_enter),
            "io_uring is a large kernel attack surface",
        ),
        deny(
            sys!(SYS_io_uring_register),
            "io_uring is a large kernel attack surface",
        ),
        deny_when(
            sys!(SYS_personality),
            "personality flags can disable ASLR; only the query and PER_LINUX are allowed",
            vec![vec![
                arg(0, ArgOp::Ne(PER_LINUX)),
                arg(0, ArgOp::Ne(PERSONALITY_QUERY)),
            ]],
        ),
        // The machine itself.
        deny(sys!(SYS_kexec_load), "loads a new kernel"),
        deny(sys!(SYS_kexec_file_load), "loads a new kernel"),
        deny(sys!(SYS_init_module), "loads kernel code"),
        deny(sys!(SYS_finit_module), "loads kernel code"),
        deny(sys!(SYS_delete_module), "unloads kernel code"),
        deny(sys!(SYS_reboot), "reboots the machine"),
        deny(sys!(SYS_swapon), "changes the machine's swap"),
        deny(sys!(SYS_swapoff), "changes the machine's swap"),
        deny(
            sys!(SYS_acct),
            "turns process accounting on or off for the machine",
        ),
        deny(sys!(SYS_quotactl), "changes filesystem quotas"),
        deny(sys!(SYS_quotactl_fd), "changes filesystem quotas"),
        // Sockets that reach below the network policy.
        deny_when(
            sys!(SYS_socket),
            if profile.share_net {
                "raw, packet and vsock sockets bypass the network policy; netlink other than \
                 NETLINK_ROUTE reaches the host's kernel (sock_diag lists its connections)"
            } else {
                "raw, packet and vsock sockets bypass the network policy; netlink is kernel \
                 attack surface a run without network never needs"
            },
            socket_rules,
        ),
        deny_when(
            sys!(SYS_socketpair),
            "packet and vsock socket pairs bypass the network policy",
            vec![
                vec![arg(0, ArgOp::Eq(u(libc::AF_PACKET)))],
                vec![arg(0, ArgOp::Eq(u(libc::AF_VSOCK)))],
            ],
        ),
        // Memory the sandbox cannot see into or execute from.
        deny(
            sys!(SYS_memfd_secret),
            "secret memory is removed from the kernel's direct map: rarely used kernel code no run needs",
        ),
        memfd,
    ];
    #[cfg(target_arch = "x86_64")]
    list.push(deny(
        sys!(SYS_modify_ldt),
        "16-bit segments in the LDT are old, rarely used kernel attack surface",
    ));
    list
}

/// Builds the BPF program for [`denied_syscalls`] on the host architecture. Pure: no syscalls.
pub fn build_program(profile: Profile) -> Result<BpfProgram, SeccompError> {
    build_program_for(&denied_syscalls(profile), host_arch())
}

#[cfg(target_arch = "x86_64")]
fn host_arch() -> TargetArch {
    TargetArch::x86_64
}

#[cfg(target_arch = "aarch64")]
fn host_arch() -> TargetArch {
    TargetArch::aarch64
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("the seccomp policy has syscall numbers for x86_64 and aarch64 only");

/// Installs `program` on the calling thread. Threads and processes it creates afterwards, and
/// programs it `exec`s, inherit the filter.
///
/// `seccompiler::apply_filter` also sets `PR_SET_NO_NEW_PRIVS` (the kernel requires it, or
/// `CAP_SYS_ADMIN`, to install a filter); callers set it themselves anyway, earlier, so the order
/// of the jail sequence does not depend on this detail.
pub fn install(program: &BpfProgram) -> Result<(), SeccompError> {
    seccompiler::apply_filter(program).map_err(|error| SeccompError::Install { error })
}

/// `band learn` only: the syscalls that name a path to open or run, which the observing run's
/// second filter hands to band-server (`SECCOMP_RET_USER_NOTIF`) before they run; and the
/// lookups (the stat family, `access`) a shell makes before it runs a command by name (dash and
/// bash look a name up in each PATH folder and exec only what they find), which band-server
/// keeps only for a program folder's missing name.
pub(crate) fn observed_syscalls() -> Vec<i64> {
    let mut v = vec![
        libc::SYS_openat,
        libc::SYS_openat2,
        libc::SYS_execve,
        libc::SYS_execveat,
        libc::SYS_newfstatat,
        libc::SYS_statx,
        libc::SYS_faccessat,
        libc::SYS_faccessat2,
    ];
    #[cfg(target_arch = "x86_64")]
    v.extend([
        libc::SYS_open,
        libc::SYS_creat,
        libc::SYS_stat,
        libc::SYS_lstat,
        libc::SYS_access,
    ]);
    v
}

/// The observing filter (`band learn`): [`observed_syscalls`] of the host architecture return
/// `SECCOMP_RET_USER_NOTIF`, everything else `ALLOW` (the run's deny filter, installed too,
/// still decides: of two filters' answers the kernel takes the stricter, and an errno is
/// stricter than a notification). Pure.
///
/// ```text
/// 0: A = seccomp_data.arch
/// 1: if A == host arch goto 2 else goto ALLOW
/// 2: A = seccomp_data.nr
/// 3…: if A == nr_i goto NOTIFY
///    ALLOW
///    NOTIFY
/// ```
pub fn notify_program() -> Vec<libc::sock_filter> {
    #[cfg(target_arch = "x86_64")]
    let arch = AUDIT_ARCH_X86_64;
    #[cfg(target_arch = "aarch64")]
    let arch = AUDIT_ARCH_AARCH64;
    let nrs = observed_syscalls();
    let n = nrs.len();
    let mut p = vec![
        stmt(BPF_LD_W_ABS, SECCOMP_DATA_ARCH),
        jump(BPF_JMP_JEQ_K, arch, 0, (n + 1) as u8),
        stmt(BPF_LD_W_ABS, SECCOMP_DATA_NR),
    ];
    for (i, nr) in nrs.iter().enumerate() {
        // Matched: jump over the rest of the tests and the ALLOW to NOTIFY.
        p.push(jump(BPF_JMP_JEQ_K, *nr as u32, (n - i) as u8, 0));
    }
    p.push(stmt(BPF_RET_K, libc::SECCOMP_RET_ALLOW));
    p.push(stmt(BPF_RET_K, libc::SECCOMP_RET_USER_NOTIF));
    p.into_iter()
        .map(|f| libc::sock_filter {
            code: f.code,
            jt: f.jt,
            jf: f.jf,
            k: f.k,
        })
        .collect()
}

// Classic BPF opcodes (linux/bpf_common.h). seccompiler does not export its own.
const BPF_LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const BPF_JMP_JA: u16 = 0x05;
const BPF_JMP_JEQ_K: u16 = 0x05 | 0x10;
const BPF_JMP_JGE_K: u16 = 0x05 | 0x30;
const BPF_RET_K: u16 = 0x06;

/// Offsets in `struct seccomp_data`.
const SECCOMP_DATA_NR: u32 = 0;
const SECCOMP_DATA_ARCH: u32 = 4;

/// `AUDIT_ARCH_X86_64` (linux/audit.h): `EM_X86_64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE`.
const AUDIT_ARCH_X86_64: u32 = 62 | 0x8000_0000 | 0x4000_0000;
/// `AUDIT_ARCH_AARCH64`: `EM_AARCH64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE`.
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH_AARCH64: u32 = 183 | 0x8000_0000 | 0x4000_0000;
/// `__X32_SYSCALL_BIT`: x32-ABI syscalls arrive with `AUDIT_ARCH_X86_64` and this bit set in the
/// number, so a filter keyed on x86_64 numbers would not match them.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// The kernel's limit on a classic BPF program (`BPF_MAXINSNS`).
const BPF_MAX_LEN: usize = 4096;

fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

/// Fails every x32-ABI syscall with `EPERM`; falls through for everything else. Numbers at or
/// above the x32 bit that are not x32 calls (`-1` from a tracer, garbage) get `EPERM` too; the
/// kernel would fail them with `ENOSYS`.
///
/// ```text
/// 0: A = seccomp_data.arch
/// 1: if A == AUDIT_ARCH_X86_64 goto 2 else goto 5
/// 2: A = seccomp_data.nr
/// 3: if A >= X32_SYSCALL_BIT goto 4 else goto 5
/// 4: return ERRNO(EPERM)
/// 5: (first instruction of the seccompiler program)
/// ```
fn x32_guard() -> Vec<sock_filter> {
    vec![
        stmt(BPF_LD_W_ABS, SECCOMP_DATA_ARCH),
        jump(BPF_JMP_JEQ_K, AUDIT_ARCH_X86_64, 0, 3),
        stmt(BPF_LD_W_ABS, SECCOMP_DATA_NR),
        jump(BPF_JMP_JGE_K, X32_SYSCALL_BIT, 0, 1),
        stmt(BPF_RET_K, u32::from(SeccompAction::Errno(EPERM))),
    ]
}

fn to_rule(name: &'static str, conditions: &[ArgCond]) -> Result<SeccompRule, SeccompError> {
    let conditions = conditions
        .iter()
        .map(|c| {
            let (op, value) = match c.op {
                ArgOp::Eq(v) => (SeccompCmpOp::Eq, v),
                ArgOp::Ne(v) => (SeccompCmpOp::Ne, v),
                ArgOp::MaskedEq { mask, value } => (SeccompCmpOp::MaskedEq(mask.into()), value),
            };
            SeccompCondition::new(c.index, SeccompCmpArgLen::Dword, op, value.into())
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| SeccompError::Rule { name, error })?;
    SeccompRule::new(conditions).map_err(|error| SeccompError::Rule { name, error })
}

/// seccompiler gives one filter a single match action, so the deny list is compiled into one
/// filter per errno and the filters are chained: in every filter but the last, each
/// `return ALLOW` becomes a jump to the next filter. Replacing one instruction with one
/// instruction keeps every relative jump inside the filter valid.
fn build_program_for(
    denied: &[DeniedSyscall],
    arch: TargetArch,
) -> Result<BpfProgram, SeccompError> {
    let mut by_errno: BTreeMap<u32, BTreeMap<i64, Vec<SeccompRule>>> = BTreeMap::new();
    let mut seen: BTreeMap<i64, &'static str> = BTreeMap::new();
    for entry in denied {
        if seen.insert(entry.nr, entry.name).is_some() {
            return Err(SeccompError::Duplicate {
                name: entry.name,
                nr: entry.nr,
            });
        }
        let rules = entry
            .when
            .iter()
            .map(|conditions| to_rule(entry.name, conditions))
            .collect::<Result<Vec<_>, _>>()?;
        by_errno
            .entry(entry.errno)
            .or_default()
            .insert(entry.nr, rules);
    }

    let mut program = if arch == TargetArch::x86_64 {
        x32_guard()
    } else {
        Vec::new()
    };
    let allow = u32::from(SeccompAction::Allow);
    let count = by_errno.len();
    for (i, (errno, rules)) in by_errno.into_iter().enumerate() {
        let compile = |error| SeccompError::Compile { errno, error };
        let filter = SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(errno),
            arch,
        )
        .map_err(compile)?;
        let mut chunk = BpfProgram::try_from(filter).map_err(compile)?;
        if i + 1 < count {
            let len = chunk.len();
            for (at, insn) in chunk.iter_mut().enumerate() {
                if insn.code == BPF_RET_K && insn.k == allow {
                    // Lands on the first instruction after this chunk; `len - at - 1` fits in u32
                    // because `len` is checked against BPF_MAX_LEN below.
                    *insn = stmt(BPF_JMP_JA, u32::try_from(len - at - 1).unwrap_or(u32::MAX));
                }
            }
        }
        program.append(&mut chunk);
        if program.len() > BPF_MAX_LEN {
            break;
        }
    }
    if program.len() > BPF_MAX_LEN {
        return Err(SeccompError::TooLarge {
            len: program.len(),
            max: BPF_MAX_LEN,
        });
    }
    Ok(program)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::collections::BTreeSet;

    /// The syscalls the brief requires, spelled independently of the data.
    const REQUIRED: &[&str] = &[
        "ptrace",
        "process_vm_readv",
        "process_vm_writev",
        "pidfd_getfd",
        "mount",
        "umount2",
        "pivot_root",
        "move_mount",
        "open_tree",
        "fsopen",
        "fsmount",
        "fsconfig",
        "fspick",
        "mount_setattr",
        "unshare",
        "setns",
        "keyctl",
        "add_key",
        "request_key",
        "bpf",
        "perf_event_open",
        "userfaultfd",
        "io_setup",
        "io_uring_setup",
        "io_uring_enter",
        "io_uring_register",
        "kexec_load",
        "kexec_file_load",
        "init_module",
        "finit_module",
        "delete_module",
        "open_by_handle_at",
        "name_to_handle_at",
        "reboot",
        "swapon",
        "swapoff",
        "acct",
        "quotactl",
        "personality",
        "clone",
        "clone3",
        "socket",
        "socketpair",
        "memfd_secret",
        "memfd_create",
    ];

    /// Runs a program of the four instructions [`notify_program`] uses on (arch, nr).
    fn eval(p: &[libc::sock_filter], arch: u32, nr: u32) -> u32 {
        let (mut pc, mut a) = (0usize, 0u32);
        loop {
            let f = p[pc];
            pc += 1;
            match f.code {
                BPF_LD_W_ABS => a = if f.k == SECCOMP_DATA_ARCH { arch } else { nr },
                BPF_JMP_JEQ_K => pc += usize::from(if a == f.k { f.jt } else { f.jf }),
                BPF_RET_K => return f.k,
                c => panic!("unexpected opcode {c:#x}"),
            }
        }
    }

    #[test]
    fn the_observing_filter_notifies_opens_and_execs_and_allows_the_rest() {
        let p = notify_program();
        #[cfg(target_arch = "x86_64")]
        let arch = AUDIT_ARCH_X86_64;
        #[cfg(target_arch = "aarch64")]
        let arch = AUDIT_ARCH_AARCH64;
        for nr in observed_syscalls() {
            assert_eq!(
                eval(&p, arch, nr as u32),
                libc::SECCOMP_RET_USER_NOTIF,
                "{nr}"
            );
            // Another architecture's numbers are the deny filter's business.
            assert_eq!(eval(&p, arch ^ 1, nr as u32), libc::SECCOMP_RET_ALLOW);
        }
        for nr in [
            libc::SYS_read,
            libc::SYS_write,
            libc::SYS_close,
            libc::SYS_fstat,
        ] {
            assert_eq!(eval(&p, arch, nr as u32), libc::SECCOMP_RET_ALLOW, "{nr}");
        }
    }

    fn entry(name: &str) -> DeniedSyscall {
        denied_syscalls(Profile::default())
            .into_iter()
            .find(|d| d.name == name)
            .unwrap_or_else(|| panic!("{name} is not in the deny list"))
    }

    #[test]
    fn every_required_syscall_is_listed() {
        let names: BTreeSet<&str> = denied_syscalls(Profile::default())
            .iter()
            .map(|d| d.name)
            .collect();
        let missing: Vec<&&str> = REQUIRED.iter().filter(|n| !names.contains(**n)).collect();
        assert!(
            missing.is_empty(),
            "missing from the deny list: {missing:?}"
        );
    }

    #[test]
    fn no_duplicate_names_or_numbers() {
        let list = denied_syscalls(Profile::default());
        let names: BTreeSet<&str> = list.iter().map(|d| d.name).collect();
        let nrs: BTreeSet<i64> = list.iter().map(|d| d.nr).collect();
        assert_eq!(names.len(), list.len());
        assert_eq!(nrs.len(), list.len());
    }

    #[test]
    fn every_reason_is_one_lowercase_line() {
        for d in denied_syscalls(Profile::default()) {
            assert!(!d.reason.is_empty(), "{} has no reason", d.name);
            assert!(!d.reason.contains('\n'), "{} reason spans lines", d.name);
            assert!(
                !d.reason.starts_with(char::is_uppercase) && !d.reason.ends_with('.'),
                "{} reason should be lowercase without a trailing period: {}",
                d.name,
                d.reason
            );
        }
    }

    #[test]
    fn clone3_gets_enosys_and_everything_else_eperm() {
        for d in denied_syscalls(Profile::default()) {
            let want = if d.name == "clone3" { ENOSYS } else { EPERM };
            assert_eq!((d.name, d.errno), (d.name, want));
        }
    }

    #[test]
    fn names_match_numbers() {
        assert_eq!(entry("ptrace").nr, libc::SYS_ptrace);
        assert_eq!(entry("clone3").nr, libc::SYS_clone3);
        assert_eq!(entry("socket").nr, libc::SYS_socket);
    }

    #[test]
    fn duplicate_entries_are_rejected() {
        let mut list = denied_syscalls(Profile::default());
        list.push(deny(sys!(SYS_ptrace), "again"));
        let err = build_program_for(&list, host_arch()).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "syscall ptrace (nr {}) is listed twice in the seccomp deny list",
                libc::SYS_ptrace
            )
        );
    }

    #[test]
    fn program_fits_the_kernel_limit() {
        let program = build_program(Profile::default()).unwrap();
        assert!(
            program.len() <= BPF_MAX_LEN,
            "{} instructions",
            program.len()
        );
    }

    // ---- A classic-BPF interpreter, enough for seccomp programs, to test the program itself
    // ---- (including the hand-written x32 guard and the chaining) on any host.

    const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
    const KILL_PROCESS: u32 = libc::SECCOMP_RET_KILL_PROCESS;
    const AUDIT_ARCH_I386: u32 = 3 | 0x4000_0000;
    const AUDIT_ARCH_AARCH64: u32 = 183 | 0x8000_0000 | 0x4000_0000;

    fn errno(e: u32) -> u32 {
        libc::SECCOMP_RET_ERRNO | e
    }

    fn host_audit_arch() -> u32 {
        match host_arch() {
            TargetArch::x86_64 => AUDIT_ARCH_X86_64,
            _ => AUDIT_ARCH_AARCH64,
        }
    }

    /// Runs `program` on a `struct seccomp_data` (little endian) and returns the action.
    fn run(program: &[sock_filter], arch: u32, nr: u32, args: &[u64]) -> u32 {
        let mut data = Vec::with_capacity(64);
        data.extend_from_slice(&nr.to_le_bytes());
        data.extend_from_slice(&arch.to_le_bytes());
        data.extend_from_slice(&0u64.to_le_bytes());
        for i in 0..6 {
            data.extend_from_slice(&args.get(i).copied().unwrap_or(0).to_le_bytes());
        }
        let mut acc: u32 = 0;
        let mut pc = 0usize;
        loop {
            let insn = program.get(pc).expect("ran off the end of the program");
            pc += 1;
            let k = insn.k;
            let branch = |taken: bool| usize::from(if taken { insn.jt } else { insn.jf });
            match insn.code {
                0x20 => {
                    let at = k as usize;
                    acc = u32::from_le_bytes(data[at..at + 4].try_into().unwrap());
                }
                0x54 => acc &= k,                   // ALU | AND | K
                0x05 => pc += k as usize,           // JMP | JA
                0x15 => pc += branch(acc == k),     // JEQ
                0x25 => pc += branch(acc > k),      // JGT
                0x35 => pc += branch(acc >= k),     // JGE
                0x45 => pc += branch(acc & k != 0), // JSET
                0x06 => return k,                   // RET | K
                code => panic!("unexpected BPF opcode {code:#x} at {}", pc - 1),
            }
        }
    }

    fn host(nr: i64, args: &[u64]) -> u32 {
        let program = build_program(Profile::default()).unwrap();
        run(&program, host_audit_arch(), nr as u32, args)
    }

    fn raw(v: i32) -> u64 {
        u64::from(v as u32)
    }

    #[test]
    fn every_unconditional_entry_gets_its_errno() {
        for d in denied_syscalls(Profile::default())
            .iter()
            .filter(|d| d.when.is_empty())
        {
            assert_eq!((d.name, host(d.nr, &[])), (d.name, errno(d.errno)));
        }
    }

    #[test]
    fn ordinary_syscalls_are_allowed() {
        for nr in [
            libc::SYS_read,
            libc::SYS_write,
            libc::SYS_getpid,
            libc::SYS_execve,
        ] {
            assert_eq!(host(nr, &[]), ALLOW, "nr {nr}");
        }
    }

    #[test]
    fn clone3_gets_enosys_through_the_chain() {
        assert_eq!(host(libc::SYS_clone3, &[]), errno(ENOSYS));
    }

    #[test]
    fn clone_with_any_namespace_flag_is_denied() {
        let fork_like = raw(libc::SIGCHLD);
        let thread_like = raw(libc::CLONE_VM
            | libc::CLONE_FS
            | libc::CLONE_FILES
            | libc::CLONE_SIGHAND
            | libc::CLONE_THREAD
            | libc::CLONE_SYSVSEM
            | libc::CLONE_SETTLS
            | libc::CLONE_PARENT_SETTID
            | libc::CLONE_CHILD_CLEARTID);
        assert_eq!(host(libc::SYS_clone, &[fork_like]), ALLOW);
        assert_eq!(host(libc::SYS_clone, &[thread_like]), ALLOW);
        for (name, flag) in CLONE_NAMESPACE_FLAGS {
            assert_eq!(
                (name, host(libc::SYS_clone, &[fork_like | raw(flag)])),
                (name, errno(EPERM))
            );
        }
        // The kernel reads only the low 32 bits of clone's flags; so does the filter.
        assert_eq!(
            host(libc::SYS_clone, &[fork_like | (1 << 40)]),
            ALLOW,
            "high bits alone must not matter"
        );
    }

    #[test]
    fn socket_families_and_raw_types() {
        let socket = |domain: i32, ty: i32| host(libc::SYS_socket, &[raw(domain), raw(ty), 0]);
        let nb = libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
        assert_eq!(socket(libc::AF_PACKET, libc::SOCK_RAW), errno(EPERM));
        assert_eq!(socket(libc::AF_PACKET, libc::SOCK_DGRAM), errno(EPERM));
        assert_eq!(socket(libc::AF_VSOCK, libc::SOCK_STREAM), errno(EPERM));
        assert_eq!(socket(libc::AF_INET, libc::SOCK_RAW), errno(EPERM));
        assert_eq!(socket(libc::AF_INET, libc::SOCK_RAW | nb), errno(EPERM));
        assert_eq!(
            socket(libc::AF_INET6, libc::SOCK_RAW | libc::SOCK_NONBLOCK),
            errno(EPERM)
        );
        assert_eq!(socket(libc::AF_INET, SOCK_PACKET | nb), errno(EPERM));
        assert_eq!(socket(libc::AF_INET, libc::SOCK_STREAM | nb), ALLOW);
        assert_eq!(socket(libc::AF_INET, libc::SOCK_DGRAM), ALLOW);
        assert_eq!(socket(libc::AF_INET6, libc::SOCK_STREAM), ALLOW);
        assert_eq!(socket(libc::AF_UNIX, libc::SOCK_STREAM), ALLOW);
        // Without allow.net no netlink socket at all (issue 13, item 11).
        assert_eq!(socket(libc::AF_NETLINK, libc::SOCK_RAW), errno(EPERM));
        assert_eq!(
            socket(libc::AF_NETLINK, libc::SOCK_DGRAM | nb),
            errno(EPERM)
        );
        let pair = |domain: i32| host(libc::SYS_socketpair, &[raw(domain), raw(libc::SOCK_RAW), 0]);
        assert_eq!(pair(libc::AF_PACKET), errno(EPERM));
        assert_eq!(pair(libc::AF_VSOCK), errno(EPERM));
        assert_eq!(pair(libc::AF_UNIX), ALLOW);
    }

    fn with(profile: Profile, nr: i64, args: &[u64]) -> u32 {
        let program = build_program(profile).unwrap();
        run(&program, host_audit_arch(), nr as u32, args)
    }

    #[test]
    fn netlink_only_route_and_only_with_network() {
        let net = Profile {
            share_net: true,
            ..Profile::default()
        };
        let netlink = |p: Profile, proto: u64| {
            with(
                p,
                libc::SYS_socket,
                &[
                    raw(libc::AF_NETLINK),
                    raw(libc::SOCK_RAW | libc::SOCK_CLOEXEC),
                    proto,
                ],
            )
        };
        // NETLINK_ROUTE (0), NETLINK_SOCK_DIAG (4), NETLINK_NETFILTER (12), KOBJECT_UEVENT (15).
        for proto in [0, 4, 12, 15] {
            assert_eq!(netlink(Profile::default(), proto), errno(EPERM), "{proto}");
        }
        assert_eq!(netlink(net, 0), ALLOW, "getaddrinfo's NETLINK_ROUTE");
        for proto in [4, 12, 15] {
            assert_eq!(netlink(net, proto), errno(EPERM), "{proto}");
        }
        // The rest of the socket policy is the same with network.
        assert_eq!(
            with(
                net,
                libc::SYS_socket,
                &[raw(libc::AF_PACKET), raw(libc::SOCK_RAW), 0]
            ),
            errno(EPERM)
        );
        assert_eq!(
            with(
                net,
                libc::SYS_socket,
                &[raw(libc::AF_INET), raw(libc::SOCK_STREAM), 0]
            ),
            ALLOW
        );
    }

    #[test]
    fn memfd_secret_and_modify_ldt_are_denied() {
        assert_eq!(host(libc::SYS_memfd_secret, &[0]), errno(EPERM));
        #[cfg(target_arch = "x86_64")]
        assert_eq!(host(libc::SYS_modify_ldt, &[0, 0, 16]), errno(EPERM));
    }

    #[test]
    fn memfd_create_executable_is_denied_and_without_noexec_every_memfd() {
        let mfd_cloexec = 1;
        let mfd_noexec_seal = 8;
        let memfd = |p: Profile, flags: u64| with(p, libc::SYS_memfd_create, &[0, flags]);
        assert_eq!(memfd(Profile::default(), 0), ALLOW);
        assert_eq!(memfd(Profile::default(), mfd_cloexec), ALLOW);
        assert_eq!(memfd(Profile::default(), mfd_noexec_seal), ALLOW);
        assert_eq!(memfd(Profile::default(), u64::from(MFD_EXEC)), errno(EPERM));
        assert_eq!(
            memfd(Profile::default(), u64::from(MFD_EXEC) | mfd_cloexec),
            errno(EPERM)
        );
        let old_kernel = Profile {
            deny_memfd: true,
            ..Profile::default()
        };
        for flags in [0, mfd_cloexec, mfd_noexec_seal] {
            assert_eq!(memfd(old_kernel, flags), errno(ENOSYS), "{flags}");
        }
    }

    #[test]
    fn the_profile_round_trips_and_defaults_to_the_strictest() {
        let p: Profile = serde_json::from_str("{}").unwrap();
        assert_eq!(p, Profile::default());
        assert!(!p.share_net);
        let p = Profile {
            share_net: true,
            deny_memfd: true,
        };
        let back: Profile = serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
        assert_eq!(back, p);
    }

    #[test]
    fn personality_only_queries_and_per_linux() {
        let personality = |p: u64| host(libc::SYS_personality, &[p]);
        assert_eq!(personality(0), ALLOW);
        assert_eq!(personality(0xffff_ffff), ALLOW);
        assert_eq!(personality(8), errno(EPERM), "PER_LINUX32");
        assert_eq!(personality(0x0040000), errno(EPERM), "ADDR_NO_RANDOMIZE");
    }

    #[test]
    fn foreign_architecture_is_killed() {
        let program = build_program(Profile::default()).unwrap();
        assert_eq!(run(&program, AUDIT_ARCH_I386, 20, &[]), KILL_PROCESS);
    }

    #[test]
    fn only_the_last_chunk_returns_allow() {
        // Two chunks, EPERM then ENOSYS, each opening with seccompiler's arch load. Every ALLOW
        // return of the first was rewritten into a jump to the second.
        let program = build_program(Profile::default()).unwrap();
        let chunk_starts: Vec<usize> = program
            .iter()
            .enumerate()
            .filter(|(at, i)| *at >= 5 && i.code == BPF_LD_W_ABS && i.k == SECCOMP_DATA_ARCH)
            .map(|(at, _)| at)
            .collect();
        assert_eq!(chunk_starts.len(), 2, "one chunk per errno");
        let last = chunk_starts[1];
        let allow_before = program[..last]
            .iter()
            .filter(|i| i.code == BPF_RET_K && i.k == ALLOW)
            .count();
        assert_eq!(allow_before, 0);
        for (at, insn) in program[..last].iter().enumerate() {
            if insn.code == BPF_JMP_JA && insn.k as usize + at + 1 > last {
                panic!("jump at {at} overshoots the next chunk at {last}");
            }
        }
        assert_eq!(
            program.last().map(|i| (i.code, i.k)),
            Some((BPF_RET_K, ALLOW))
        );
    }

    #[cfg(target_arch = "x86_64")]
    mod x32 {
        use super::*;
        use pretty_assertions::assert_eq;

        #[test]
        fn the_guard_comes_first() {
            let program = build_program(Profile::default()).unwrap();
            assert_eq!(program[..5].to_vec(), x32_guard());
        }

        #[test]
        fn x32_syscalls_are_denied() {
            let program = build_program(Profile::default()).unwrap();
            for nr in [
                libc::SYS_getpid,
                libc::SYS_read,
                libc::SYS_ptrace,
                libc::SYS_clone,
            ] {
                let x32 = (nr as u32) | X32_SYSCALL_BIT;
                assert_eq!(
                    run(&program, AUDIT_ARCH_X86_64, x32, &[]),
                    errno(EPERM),
                    "nr {nr}"
                );
            }
            // x32's own numbers for its compat syscalls start at 512.
            assert_eq!(
                run(&program, AUDIT_ARCH_X86_64, X32_SYSCALL_BIT | 512, &[]),
                errno(EPERM)
            );
        }

        #[test]
        fn the_guard_falls_through_for_x86_64_numbers() {
            let program = build_program(Profile::default()).unwrap();
            assert_eq!(run(&program, AUDIT_ARCH_X86_64, 39, &[]), ALLOW, "getpid");
            assert_eq!(
                run(&program, AUDIT_ARCH_X86_64, X32_SYSCALL_BIT - 1, &[]),
                ALLOW,
                "just below the x32 bit"
            );
        }

        #[test]
        fn the_guard_falls_through_for_other_arches_to_the_arch_check() {
            let program = build_program(Profile::default()).unwrap();
            // i386 number with the x32 bit: not x86_64, so the guard must not answer; the
            // seccompiler arch check kills it.
            let nr = X32_SYSCALL_BIT | 20;
            assert_eq!(run(&program, AUDIT_ARCH_I386, nr, &[]), KILL_PROCESS);
        }
    }

    // ---- Kernel tests: install the real program in a child process and probe it.

    const CHILD_ENV: &str = "BAND_SECCOMP_CHILD";
    const SCRIPT_ENV: &str = "BAND_SECCOMP_PROBE_SCRIPT";

    struct Probe {
        label: &'static str,
        nr: i64,
        /// Python expressions for the arguments.
        args: &'static str,
        /// `Some(errno)` for a denied call, `None` for a call that must succeed.
        denied: Option<u32>,
    }

    fn probes() -> Vec<Probe> {
        let d = |label, nr, args| Probe {
            label,
            nr,
            args,
            denied: Some(EPERM),
        };
        let ok = |label, nr, args| Probe {
            label,
            nr,
            args,
            denied: None,
        };
        let mut probes = vec![
            d("ptrace", libc::SYS_ptrace, "3, 1, 0, 0"), // PTRACE_PEEKUSER on pid 1
            d(
                "process_vm_readv",
                libc::SYS_process_vm_readv,
                "os.getpid(), 0, 0, 0, 0, 0",
            ),
            d("mount", libc::SYS_mount, "0, 0, 0, 0, 0"),
            d("setns", libc::SYS_setns, "-1, 0"),
            d("fsopen", libc::SYS_fsopen, "0, 0"),
            d("open_by_handle_at", libc::SYS_open_by_handle_at, "-1, 0, 0"),
            d("keyctl", libc::SYS_keyctl, "0, -1, 0"), // KEYCTL_GET_KEYRING_ID, thread keyring
            d("bpf", libc::SYS_bpf, "0, 0, 0"),
            d(
                "perf_event_open",
                libc::SYS_perf_event_open,
                "0, 0, -1, -1, 0",
            ),
            d("userfaultfd", libc::SYS_userfaultfd, "0"),
            d("io_uring_setup", libc::SYS_io_uring_setup, "1, 0"),
            d("io_setup", libc::SYS_io_setup, "1, 0"),
            // Namespace flag plus CLONE_FS: EINVAL without the filter, so nothing ever forks.
            d(
                "clone_newns",
                libc::SYS_clone,
                "0x00020000 | 0x200, 0, 0, 0, 0",
            ),
            d(
                "clone_newuser",
                libc::SYS_clone,
                "0x10000000 | 0x200, 0, 0, 0, 0",
            ),
            Probe {
                denied: Some(ENOSYS),
                ..d("clone3", libc::SYS_clone3, "0, 0")
            },
            d("socket_packet", libc::SYS_socket, "17, 3, 0"),
            d(
                "socket_inet_raw_nonblock",
                libc::SYS_socket,
                "2, 3 | 0o4000, 1",
            ),
            d(
                "socket_inet6_raw_cloexec",
                libc::SYS_socket,
                "10, 3 | 0o2000000, 58",
            ),
            d("socket_inet_sock_packet", libc::SYS_socket, "2, 10, 0"),
            d("socket_vsock", libc::SYS_socket, "40, 1, 0"),
            d(
                "socketpair_packet",
                libc::SYS_socketpair,
                "17, 3, 0, ctypes.addressof(pair)",
            ),
            d("personality_linux32", libc::SYS_personality, "8"),
            d("memfd_secret", libc::SYS_memfd_secret, "0"),
            d(
                "memfd_create_exec",
                libc::SYS_memfd_create,
                "ctypes.addressof(name), 0x10",
            ),
            d("socket_netlink_route", libc::SYS_socket, "16, 3, 0"),
            d(
                "socket_netlink_diag",
                libc::SYS_socket,
                "16, 2 | 0o2000000, 4",
            ),
            ok("personality_restore", libc::SYS_personality, "0"),
            ok("personality_query", libc::SYS_personality, "0xffffffff"),
            ok("getpid", libc::SYS_getpid, ""),
            ok(
                "socket_inet_stream",
                libc::SYS_socket,
                "2, 1 | 0o2000000, 0",
            ),
            ok("socket_inet_dgram", libc::SYS_socket, "2, 2, 0"),
            ok("socket_unix", libc::SYS_socket, "1, 1, 0"),
        ];
        if cfg!(target_arch = "x86_64") {
            probes.push(d("x32_getpid", libc::SYS_getpid | 0x4000_0000, ""));
            // modify_ldt(0 = read, buf, 16): without the filter it reads the (empty) LDT.
            probes.push(d("modify_ldt", 154, "0, ctypes.addressof(ldt), 16"));
        }
        // Last: without the filter this really enters a new user namespace.
        probes.push(d("unshare_newuser", libc::SYS_unshare, "0x10000000"));
        probes
    }

    fn probe_script() -> String {
        let mut s = String::from(
            "import ctypes, os, threading\n\
             print(flush=True)\n\
             libc = ctypes.CDLL(None, use_errno=True)\n\
             libc.syscall.restype = ctypes.c_long\n\
             pair = (ctypes.c_int * 2)()\n\
             ldt = (ctypes.c_char * 16)()\n\
             name = ctypes.create_string_buffer(b'x')\n\
             def call(label, nr, *args):\n\
             \x20   ctypes.set_errno(0)\n\
             \x20   rc = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])\n\
             \x20   err = ctypes.get_errno() if rc == -1 else 0\n\
             \x20   print('probe', label, rc, err, flush=True)\n",
        );
        for p in probes() {
            let sep = if p.args.is_empty() { "" } else { ", " };
            s.push_str(&format!("call({:?}, {}{sep}{})\n", p.label, p.nr, p.args));
        }
        s.push_str(
            "pid = os.fork()\n\
             if pid == 0:\n\
             \x20   os._exit(7)\n\
             print('probe fork', os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), 0, flush=True)\n\
             t = threading.Thread(target=lambda: None)\n\
             t.start()\n\
             t.join()\n\
             print('probe thread 0 0', flush=True)\n\
             for line in open('/proc/self/status'):\n\
             \x20   key, _, value = line.partition(':')\n\
             \x20   if key in ('Seccomp', 'Seccomp_filters', 'NoNewPrivs'):\n\
             \x20       print('probe', key, value.strip(), 0, flush=True)\n",
        );
        s
    }

    fn python() -> &'static str {
        if std::path::Path::new("/usr/bin/python3").exists() {
            "/usr/bin/python3"
        } else {
            "python3"
        }
    }

    /// `label -> (rc, errno)` from the probe's `probe <label> <rc> <errno>` lines. The probe
    /// starts with an empty line because libtest's `test … ` has no newline of its own.
    fn parse_probe_output(stdout: &[u8]) -> BTreeMap<String, (i64, i64)> {
        String::from_utf8_lossy(stdout)
            .lines()
            .filter_map(|line| {
                let mut words = line.strip_prefix("probe ")?.split_whitespace();
                let label = words.next()?.to_string();
                let rc = words.next()?.parse().ok()?;
                let err = words.next()?.parse().ok()?;
                Some((label, (rc, err)))
            })
            .collect()
    }

    /// Helper for [`kernel_filter_denies_in_a_child_process`]: a no-op unless started by it.
    /// Installs the filter on this thread and `exec`s the Python probe, which inherits it.
    #[test]
    fn kernel_probe_child() {
        use std::os::unix::process::CommandExt;
        if std::env::var_os(CHILD_ENV).is_none() {
            return;
        }
        let script = std::env::var(SCRIPT_ENV).unwrap();
        install(&build_program(Profile::default()).unwrap()).unwrap();
        let err = std::process::Command::new(python())
            .arg("-c")
            .arg(script)
            .exec();
        panic!("exec {} failed: {err}", python());
    }

    #[test]
    fn kernel_filter_denies_in_a_child_process() {
        let script = probe_script();
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "layers::process::seccomp::tests::kernel_probe_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, "1")
            .env(SCRIPT_ENV, &script)
            .output()
            .unwrap();
        let got = parse_probe_output(&out.stdout);
        let context = format!(
            "status {}\nstdout:\n{}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );

        // Without the filter, for contrast: as root none of the denied probes fails with the
        // errno the filter returns, so the filtered results below cannot be the kernel's own.
        let control = std::process::Command::new(python())
            .arg("-c")
            .arg(&script)
            .output()
            .unwrap();
        let control = parse_probe_output(&control.stdout);
        let root = rustix::process::geteuid().is_root();

        assert_eq!(got.get("Seccomp"), Some(&(2, 0)), "{context}");
        assert_eq!(got.get("Seccomp_filters"), Some(&(1, 0)), "{context}");
        assert_eq!(got.get("NoNewPrivs"), Some(&(1, 0)), "{context}");
        assert_eq!(got.get("fork"), Some(&(7, 0)), "fork must work: {context}");
        assert_eq!(
            got.get("thread"),
            Some(&(0, 0)),
            "threads (clone3 fallback): {context}"
        );
        for p in probes() {
            let result = got.get(p.label).copied();
            match p.denied {
                Some(e) => {
                    assert_eq!(result, Some((-1, i64::from(e))), "{}: {context}", p.label);
                    if root {
                        let c = control.get(p.label).copied();
                        assert!(c.is_some(), "{}: no control result: {control:?}", p.label);
                        assert_ne!(c, result, "{}: the kernel alone gives {c:?}", p.label);
                    }
                }
                None => {
                    let ok = matches!(result, Some((rc, 0)) if rc >= 0);
                    assert!(ok, "{} must succeed, got {result:?}: {context}", p.label);
                }
            }
        }
    }
}
