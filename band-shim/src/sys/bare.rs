//! band-shim without the C library's start (x86-64 Linux, static-pie; see `crate::bare`): its
//! entry from `_start`, the relocation of its own image, raw system calls, the memory
//! functions compiled code calls, and an allocator. glibc's start (`__libc_start_main`) spends
//! most of a command's start in `cpuid` (an exit to the hypervisor on a VM, about 0.25 ms a
//! start); band-shim needs none of what it sets up: it never calls into glibc (no thread-local
//! storage is set up, so nothing here may touch it: no `std` I/O, no `errno`).
#![allow(unsafe_code)]

use core::arch::asm;
use core::sync::atomic::{AtomicUsize, Ordering};

#[repr(C)]
struct Dyn {
    tag: i64,
    val: u64,
}

#[repr(C)]
struct Rela {
    offset: u64,
    info: u64,
    addend: i64,
}

const DT_NULL: i64 = 0;
const DT_RELA: i64 = 7;
const DT_RELASZ: i64 = 8;
const R_X86_64_RELATIVE: u64 = 8;
const R_X86_64_IRELATIVE: u64 = 37;

/// Where a call of one of glibc's CPU-chosen functions lands: band-shim calls none, so this is a
/// bug in band-shim; the command does not run.
extern "C" fn unavailable() -> ! {
    let _ = write(
        2,
        b"band-shim: called a C library function it cannot call; refusing to run the command\n",
    );
    exit(126)
}

/// Apply the image's `R_X86_64_RELATIVE` relocations (a static-pie is loaded anywhere: every
/// pointer stored in its data is an offset until this adds the load address). The `IRELATIVE`
/// ones (glibc's own functions, chosen by CPU at the start band-shim skips) lead to
/// [`unavailable`]: band-shim calls none of them, and if it did, the command would not run.
///
/// # Safety
/// Called once, first thing, before any code reads a pointer from the image's data; the
/// `_DYNAMIC` table and the relocation entries are the linker's, inside the loaded image.
unsafe fn relocate() {
    let base: usize;
    let dynamic: *const Dyn;
    // SAFETY: two PC-relative address computations of linker-defined symbols; no memory access.
    unsafe {
        asm!("lea {0}, [rip + __ehdr_start]", out(reg) base, options(nostack, nomem));
        asm!("lea {0}, [rip + _DYNAMIC]", out(reg) dynamic, options(nostack, nomem));
    }
    let (mut rela, mut size) = (0usize, 0usize);
    let mut d = dynamic;
    // SAFETY: `_DYNAMIC` is an array of entries ended by DT_NULL; the relocation entries it
    // names lie in the image, and each RELATIVE entry's offset is a word of the image's
    // writable data (the kernel mapped it; nothing has read it yet).
    unsafe {
        while (*d).tag != DT_NULL {
            match (*d).tag {
                DT_RELA => rela = (*d).val as usize,
                DT_RELASZ => size = (*d).val as usize,
                _ => {}
            }
            d = d.add(1);
        }
        let mut r = (base + rela) as *const Rela;
        let end = (base + rela + size) as *const Rela;
        populate(r, end, base);
        while r < end {
            let at = (base + (*r).offset as usize) as *mut usize;
            match (*r).info & 0xffff_ffff {
                R_X86_64_RELATIVE => at.write(base.wrapping_add((*r).addend as usize)),
                R_X86_64_IRELATIVE => at.write(unavailable as *const () as usize),
                _ => {}
            }
            r = r.add(1);
        }
    }
}

/// Fault in, with one `madvise(MADV_POPULATE_WRITE)`, the pages the relocations `r..end` write
/// (the image's pointer-holding data, about ten pages): one system call instead of a page fault
/// for each page (a few microseconds each on a VM; issue 17, round 20). A kernel without it
/// (before Linux 5.14: `EINVAL`) leaves the faults to the relocation, as before.
///
/// # Safety
/// As [`relocate`]'s: `r..end` are the image's relocation entries; this only reads them.
unsafe fn populate(mut r: *const Rela, end: *const Rela, base: usize) {
    const MADV_POPULATE_WRITE: usize = 23;
    let (mut low, mut high) = (usize::MAX, 0usize);
    // SAFETY: as the caller's: entries of the image, read only.
    unsafe {
        while r < end {
            // Comparisons, not `min`/`max`: a debug build calls those through the image's
            // not yet relocated pointers.
            let at = base.wrapping_add((*r).offset as usize);
            if at < low {
                low = at;
            }
            if at.wrapping_add(8) > high {
                high = at.wrapping_add(8);
            }
            r = r.add(1);
        }
    }
    if low < high {
        let start = low & !4095;
        let len = ((high + 4095) & !4095) - start;
        let _ = syscall(
            libc::SYS_madvise,
            [start, len, MADV_POPULATE_WRITE, 0, 0, 0],
        );
    }
}

/// The process's entry, from `_start` (band-server's `bin/band-shim.rs`) with the initial stack
/// pointer: `argc`, the `argv` pointers, NULL, the `envp` pointers, NULL, then the auxiliary
/// vector's pairs, ended by `AT_NULL`.
///
/// # Safety
/// `sp` is the stack pointer the kernel started the process with, and this runs before anything
/// else.
pub unsafe extern "C" fn start(sp: *const usize) -> ! {
    // SAFETY: first thing, as `relocate` requires.
    unsafe { relocate() };
    // SAFETY: the kernel's initial stack: argc, then argc pointers to NUL-terminated strings and
    // a NULL, then the environment's pointers and a NULL, then the auxiliary vector (pairs of
    // words up to a pair whose key is AT_NULL, 0); all live for the whole process.
    let (argv, envp, image) = unsafe {
        let argc = *sp;
        let argv = sp.add(1) as *const *const u8;
        let mut args = alloc::vec::Vec::with_capacity(argc);
        for i in 0..argc {
            args.push(c_bytes(*argv.add(i)));
        }
        let mut env = alloc::vec::Vec::new();
        let mut e = argv.add(argc + 1);
        while !(*e).is_null() {
            env.push(c_bytes(*e));
            e = e.add(1);
        }
        let mut aux = e.add(1) as *const usize;
        let pairs = core::iter::from_fn(|| {
            let pair = (*aux as u64, *aux.add(1) as u64);
            aux = aux.add(2);
            Some(pair)
        });
        let image = crate::proto::image_addresses(pairs.take_while(|&(key, _)| key != 0));
        (args, env, image)
    };
    crate::bare::run(argv, envp, image)
}

extern crate alloc;

/// The bytes of a NUL-terminated string, without the NUL.
///
/// # Safety
/// `p` points at a NUL-terminated string that lives as long as the process.
unsafe fn c_bytes(p: *const u8) -> &'static [u8] {
    let mut n = 0;
    // SAFETY: read up to the NUL the caller promises. Volatile reads: an optimiser turns the
    // plain loop into a call of `strlen`, one of glibc's functions band-shim cannot call.
    unsafe {
        while core::ptr::read_volatile(p.add(n)) != 0 {
            n += 1;
        }
        core::slice::from_raw_parts(p, n)
    }
}

/// A raw system call: its result, or `-errno`.
fn syscall(n: i64, a: [usize; 6]) -> isize {
    let ret: isize;
    // SAFETY: the `syscall` instruction with the kernel's x86-64 convention (number in rax,
    // arguments in rdi, rsi, rdx, r10, r8, r9; rcx and r11 clobbered). Every caller below passes
    // arguments that are valid for its call: pointers to live buffers of the lengths given.
    unsafe {
        asm!(
            "syscall",
            inlateout("rax") n as isize => ret,
            in("rdi") a[0], in("rsi") a[1], in("rdx") a[2],
            in("r10") a[3], in("r8") a[4], in("r9") a[5],
            lateout("rcx") _, lateout("r11") _,
            options(nostack)
        );
    }
    ret
}

/// A system call's result: the value, or the error number.
pub type Sys = Result<usize, i32>;

fn check(r: isize) -> Sys {
    if r < 0 {
        Err(-r as i32)
    } else {
        Ok(r as usize)
    }
}

/// Retry on EINTR.
fn again(f: impl Fn() -> isize) -> Sys {
    loop {
        match check(f()) {
            Err(libc::EINTR) => continue,
            r => return r,
        }
    }
}

pub fn write(fd: i32, bytes: &[u8]) -> Sys {
    again(|| {
        syscall(
            libc::SYS_write,
            [fd as usize, bytes.as_ptr() as usize, bytes.len(), 0, 0, 0],
        )
    })
}

/// `send(fd, bytes, MSG_NOSIGNAL)`: a closed peer is an error, not a `SIGPIPE`.
pub fn send(fd: i32, bytes: &[u8]) -> Sys {
    again(|| {
        syscall(
            libc::SYS_sendto,
            [
                fd as usize,
                bytes.as_ptr() as usize,
                bytes.len(),
                libc::MSG_NOSIGNAL as usize,
                0,
                0,
            ],
        )
    })
}

pub fn close(fd: i32) {
    let _ = syscall(libc::SYS_close, [fd as usize, 0, 0, 0, 0, 0]);
}

pub fn exit(code: i32) -> ! {
    loop {
        syscall(libc::SYS_exit_group, [code as usize, 0, 0, 0, 0, 0]);
    }
}

pub fn prctl(option: i32, arg: usize) -> Sys {
    check(syscall(libc::SYS_prctl, [option as usize, arg, 0, 0, 0, 0]))
}

/// A connected `AF_UNIX` stream socket to `path` (close-on-exec), moved above the standard
/// descriptors if it took one of their numbers.
pub fn connect_unix(path: &[u8]) -> Sys {
    let fd = check(syscall(
        libc::SYS_socket,
        [
            libc::AF_UNIX as usize,
            (libc::SOCK_STREAM | libc::SOCK_CLOEXEC) as usize,
            0,
            0,
            0,
            0,
        ],
    ))? as i32;
    let fd = if fd <= 2 {
        let moved = check(syscall(
            libc::SYS_fcntl,
            [fd as usize, libc::F_DUPFD_CLOEXEC as usize, 3, 0, 0, 0],
        ));
        close(fd);
        moved? as i32
    } else {
        fd
    };
    // SAFETY: an all-zero sockaddr_un is valid; the path is copied within its bounds below.
    let mut addr: libc::sockaddr_un = unsafe { core::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    if path.len() >= addr.sun_path.len() {
        close(fd);
        return Err(libc::ENAMETOOLONG);
    }
    for (d, s) in addr.sun_path.iter_mut().zip(path) {
        *d = *s as libc::c_char;
    }
    let len = core::mem::size_of::<libc::sa_family_t>() + path.len() + 1;
    let r = again(|| {
        syscall(
            libc::SYS_connect,
            [fd as usize, &addr as *const _ as usize, len, 0, 0, 0],
        )
    });
    match r {
        Ok(_) => Ok(fd as usize),
        Err(e) => {
            close(fd);
            Err(e)
        }
    }
}

/// `SO_RCVTIMEO` of `secs` seconds.
pub fn set_read_timeout(fd: i32, secs: i64) -> Sys {
    let tv = libc::timeval {
        tv_sec: secs,
        tv_usec: 0,
    };
    check(syscall(
        libc::SYS_setsockopt,
        [
            fd as usize,
            libc::SOL_SOCKET as usize,
            libc::SO_RCVTIMEO as usize,
            &tv as *const _ as usize,
            core::mem::size_of::<libc::timeval>(),
            0,
        ],
    ))
}

/// `recvmsg` into `buf` (control messages received close-on-exec): the byte count and the
/// first descriptor that came with them (`SCM_RIGHTS`); any other descriptor is closed.
pub fn recv_with_fd(fd: i32, buf: &mut [u8]) -> Result<(usize, Option<i32>), i32> {
    let mut control = [0u64; 8];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: an all-zero msghdr is a valid "no name, no iov, no control" value.
    let mut msg: libc::msghdr = unsafe { core::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = core::mem::size_of_val(&control) as _;
    let m = &mut msg as *mut libc::msghdr as usize;
    let n = again(|| {
        syscall(
            libc::SYS_recvmsg,
            [fd as usize, m, libc::MSG_CMSG_CLOEXEC as usize, 0, 0, 0],
        )
    })?;
    let mut got = None;
    // SAFETY: CMSG_FIRSTHDR/CMSG_NXTHDR (the libc crate's own code, no C call) walk the control
    // buffer the kernel filled in, bounded by msg_controllen; an SCM_RIGHTS header holds
    // (cmsg_len - CMSG_LEN(0)) / 4 descriptors the kernel just installed in this process.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let bytes = (*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                let data = libc::CMSG_DATA(c).cast::<i32>();
                for i in 0..bytes / 4 {
                    let d = core::ptr::read_unaligned(data.add(i));
                    if got.is_none() {
                        got = Some(d);
                    } else {
                        close(d);
                    }
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n, got))
}

/// `SIGPIPE` to its default action and an empty signal mask, as `std::process::Command` leaves
/// a program it starts (band-shim changes neither, but its caller may have).
pub fn reset_signals() -> Sys {
    // The kernel's sigaction: handler, flags, restorer, mask.
    let act: [usize; 4] = [libc::SIG_DFL, 0, 0, 0];
    check(syscall(
        libc::SYS_rt_sigaction,
        [libc::SIGPIPE as usize, act.as_ptr() as usize, 0, 8, 0, 0],
    ))?;
    let empty: u64 = 0;
    check(syscall(
        libc::SYS_rt_sigprocmask,
        [
            libc::SIG_SETMASK as usize,
            &empty as *const u64 as usize,
            0,
            8,
            0,
            0,
        ],
    ))
}

/// `execveat(fd, "", argv, envp, AT_EMPTY_PATH)`; `argv` and `envp` are NUL-terminated strings.
/// Returns only on failure, with the error number.
pub fn execveat(fd: i32, argv: &[alloc::ffi::CString], envp: &[alloc::vec::Vec<u8>]) -> i32 {
    let mut a: alloc::vec::Vec<*const u8> = argv.iter().map(|s| s.as_ptr().cast()).collect();
    a.push(core::ptr::null());
    let mut e: alloc::vec::Vec<*const u8> = envp.iter().map(|s| s.as_ptr()).collect();
    e.push(core::ptr::null());
    let empty = b"\0";
    match check(syscall(
        libc::SYS_execveat,
        [
            fd as usize,
            empty.as_ptr() as usize,
            a.as_ptr() as usize,
            e.as_ptr() as usize,
            libc::AT_EMPTY_PATH as usize,
            0,
        ],
    )) {
        Err(e) => e,
        Ok(_) => libc::EINVAL,
    }
}

/// The allocator: memory from `mmap`, in chunks of 1 MiB (a larger request gets its own
/// mapping), never given back: band-shim allocates a few kilobytes, then execs or exits.
pub struct Alloc;

static NEXT: AtomicUsize = AtomicUsize::new(0);
static END: AtomicUsize = AtomicUsize::new(0);
const CHUNK: usize = 1 << 20;

fn map(size: usize) -> Option<usize> {
    let r = syscall(
        libc::SYS_mmap,
        [
            0,
            size,
            (libc::PROT_READ | libc::PROT_WRITE) as usize,
            (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as usize,
            usize::MAX,
            0,
        ],
    );
    (r > 0).then_some(r as usize)
}

// SAFETY: `alloc` returns memory of at least `layout.size()` bytes aligned to `layout.align()`
// (fresh, from a private anonymous mapping, never handed out twice: band-shim has one thread,
// and the bump is an atomic swap besides), or null; `dealloc` never frees.
unsafe impl core::alloc::GlobalAlloc for Alloc {
    unsafe fn alloc(&self, layout: core::alloc::Layout) -> *mut u8 {
        let (size, align) = (layout.size().max(1), layout.align());
        if size + align > CHUNK / 4 {
            let pages = (size + 4095) & !4095;
            return match map(pages) {
                Some(p) if align <= 4096 => p as *mut u8,
                _ => core::ptr::null_mut(),
            };
        }
        let mut next = NEXT.load(Ordering::Relaxed);
        let mut start = (next + align - 1) & !(align - 1);
        if next == 0 || start + size > END.load(Ordering::Relaxed) {
            let Some(chunk) = map(CHUNK) else {
                return core::ptr::null_mut();
            };
            END.store(chunk + CHUNK, Ordering::Relaxed);
            next = chunk;
            start = (next + align - 1) & !(align - 1);
        }
        NEXT.store(start + size, Ordering::Relaxed);
        start as *mut u8
    }

    unsafe fn dealloc(&self, _ptr: *mut u8, _layout: core::alloc::Layout) {}
}

/// `memcpy` for band-shim's own code (glibc's is chosen by CPU at its start, which band-shim
/// skips): `rep movsb`.
///
/// # Safety
/// As C's `memcpy`.
pub unsafe fn memcpy(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    // SAFETY: the caller's `memcpy` contract: `n` bytes at `src` readable, at `dst` writable.
    unsafe {
        asm!("rep movsb", inout("rcx") n => _, inout("rdi") dst => _, inout("rsi") src => _, options(nostack, preserves_flags));
    }
    dst
}

/// `memmove`: forward, or backward (`std; rep movsb; cld`) when `dst` overlaps `src` above it.
///
/// # Safety
/// As C's `memmove`.
pub unsafe fn memmove(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    if (dst as usize) <= (src as usize) || (dst as usize) >= (src as usize).wrapping_add(n) {
        // SAFETY: no overlap that a forward copy would overwrite before reading.
        return unsafe { memcpy(dst, src, n) };
    }
    if n == 0 {
        return dst;
    }
    // SAFETY: copies the `n` bytes from the last one down; the caller's contract as memcpy's.
    unsafe {
        asm!("std", "rep movsb", "cld",
            inout("rcx") n => _, inout("rdi") dst.add(n - 1) => _, inout("rsi") src.add(n - 1) => _,
            options(nostack));
    }
    dst
}

/// `memset`: `rep stosb`.
///
/// # Safety
/// As C's `memset`.
pub unsafe fn memset(dst: *mut u8, c: i32, n: usize) -> *mut u8 {
    // SAFETY: the caller's contract: `n` bytes at `dst` writable.
    unsafe {
        asm!("rep stosb", inout("rcx") n => _, inout("rdi") dst => _, in("al") c as u8, options(nostack, preserves_flags));
    }
    dst
}

/// `memcmp` (and `bcmp`).
///
/// # Safety
/// As C's `memcmp`.
pub unsafe fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    let mut i = 0;
    while i < n {
        // SAFETY: the caller's contract: `n` bytes readable at each.
        let (x, y) = unsafe {
            (
                core::ptr::read_volatile(a.add(i)),
                core::ptr::read_volatile(b.add(i)),
            )
        };
        if x != y {
            return x as i32 - y as i32;
        }
        i += 1;
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::alloc::{GlobalAlloc, Layout};

    /// The memory functions band-shim's code runs on: overlapping moves both ways, fills,
    /// comparisons by sign.
    #[test]
    fn the_memory_functions_do_what_cs_do() {
        let mut b: [u8; 16] = core::array::from_fn(|i| i as u8);
        // SAFETY: every range lies inside `b`.
        unsafe {
            memmove(b.as_mut_ptr().add(2), b.as_ptr(), 10);
            assert_eq!(&b[..12], &[0, 1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
            memmove(b.as_mut_ptr(), b.as_ptr().add(3), 8);
            assert_eq!(&b[..8], &[1, 2, 3, 4, 5, 6, 7, 8]);
            memset(b.as_mut_ptr().add(1), 0xab, 3);
            assert_eq!(&b[..5], &[1, 0xab, 0xab, 0xab, 5]);
            let src = [9u8; 4];
            memcpy(b.as_mut_ptr(), src.as_ptr(), 4);
            assert_eq!(&b[..5], &[9, 9, 9, 9, 5]);
            assert_eq!(memcmp(b"abc".as_ptr(), b"abc".as_ptr(), 3), 0);
            assert!(memcmp(b"abc".as_ptr(), b"abd".as_ptr(), 3) < 0);
            assert!(memcmp(b"abd".as_ptr(), b"abc".as_ptr(), 3) > 0);
            assert_eq!(memmove(b.as_mut_ptr(), b.as_ptr(), 0), b.as_mut_ptr());
        }
    }

    /// Every allocation is aligned, writable and apart from the others, small or large.
    #[test]
    fn the_allocator_hands_out_aligned_disjoint_memory() {
        let mut got: Vec<(usize, usize)> = Vec::new();
        for (size, align) in [
            (1, 1),
            (24, 8),
            (3, 64),
            (4096, 4096),
            (300_000, 16),
            (7, 2),
        ] {
            let layout = Layout::from_size_align(size, align).unwrap();
            // SAFETY: a non-zero size; the memory is written within its size only.
            let p = unsafe { Alloc.alloc(layout) };
            assert!(!p.is_null());
            assert_eq!(p as usize % align, 0, "{size} {align}");
            // SAFETY: `size` bytes at `p` were just allocated.
            unsafe { memset(p, 0x5a, size) };
            got.push((p as usize, size));
        }
        got.sort_unstable();
        for w in got.windows(2) {
            assert!(w[0].0 + w[0].1 <= w[1].0, "{got:?}");
        }
    }
}
