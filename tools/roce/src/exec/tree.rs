//! The device as the kernel presents it, for the program `roce exec` runs: `/dev/infiniband/uverbsN`
//! and `rdma_cm`, `/sys/class/infiniband/<name>/`, `/sys/class/infiniband_verbs/uverbsN/`, with
//! the values that roce-verbs reports through verbs (roce-verbs `sysfs` lays them out).
//!
//! `roce exec` runs itself again as `roce __exec-in-device-tree -- PROGRAM ARGS` with the
//! program's environment; that process (single-threaded, which `unshare(CLONE_NEWUSER)` needs):
//! 1. enters a mount namespace of its own: as root, `unshare(CLONE_NEWNS)` alone; otherwise (or
//!    as root without CAP_SYS_ADMIN)
//!    `unshare(CLONE_NEWUSER | CLONE_NEWNS)` with the caller's uid and gid mapped onto 0, which
//!    allows mounts there; every mount becomes a slave of the host's, so nothing done here goes
//!    back to the host;
//! 2. mounts a tmpfs over `/sys/class` and one over `/dev`, binds each of the host's entries back
//!    into them (a directory with what is mounted under it, a file or device node as itself, a
//!    symbolic link copied), adds the device's entries (a node is a bind of the host's
//!    `/dev/null`: a character device, readable and writable, that is never asked for anything
//!    else), and makes both tmpfs read-only. A host directory that the device adds to
//!    (`/sys/class/infiniband` of a real RNIC) keeps its entries next to ours;
//! 3. without root, enters a second user namespace that maps the caller's uid and gid back
//!    onto themselves, so the program runs as the caller, without capabilities;
//! 4. `exec`s the program, which keeps the pid that `roce exec` waits for and signals.
//!
//! The network namespace is the caller's. Where user namespaces are refused (a container
//! without them, `user.max_user_namespaces = 0`), the program runs without the trees and a
//! warning says so; `--no-sysfs` runs it without them and without the extra process.

use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::{FileTypeExt as _, PermissionsExt as _, symlink};
use std::os::unix::io::AsRawFd as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{Context as _, bail};
use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};
use nix::unistd::{getgid, getuid};
use roce_verbs::config::DeviceSpec;
use roce_verbs::device::DeviceModel;
use roce_verbs::sysfs::{self, Node, Tree};

/// The hidden subcommand the helper runs as.
pub(crate) const SUBCOMMAND: &str = "__exec-in-device-tree";

/// The exit status when the program cannot be started (a shell's).
const CANNOT_RUN: u8 = 127;

/// `roce __exec-in-device-tree -- PROGRAM [ARGS]`: what `roce exec` runs; not for people.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The program and its arguments, after `--`.
    #[arg(last = true, required = true)]
    command: Vec<OsString>,
}

/// The command that runs `command` in the trees: this executable as the helper.
pub(crate) fn helper_command(command: &[OsString]) -> anyhow::Result<Command> {
    let exe = std::env::current_exe().context("cannot find this executable to run it again")?;
    let mut cmd = Command::new(exe);
    cmd.arg(SUBCOMMAND).arg("--").args(command);
    Ok(cmd)
}

/// The first `uverbsN` that the host has neither in `/dev/infiniband` nor in
/// `/sys/class/infiniband_verbs`, so that a real device stays visible next to ours.
pub(crate) fn free_uverbs_name() -> String {
    (0..)
        .map(|n| format!("uverbs{n}"))
        .find(|name| {
            !Path::new("/dev/infiniband").join(name).exists()
                && !Path::new("/sys/class/infiniband_verbs").join(name).exists()
        })
        .unwrap_or_else(|| "uverbs0".to_owned())
}

/// The helper: sets up the trees, then becomes the program. Returns only if the program
/// cannot be run.
pub(crate) fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let (program, rest) = args
        .command
        .split_first()
        .context("no program given after --")?;
    match DeviceSpec::from_env(|k| std::env::var(k).ok()) {
        Ok(Some(spec)) => {
            if let Err(err) = enter(&DeviceModel::for_host(spec)) {
                match err {
                    Setup::Refused(err) => eprintln!(
                        "roce exec: warning: no /dev/infiniband or /sys/class/infiniband for {} \
                         ({err:#}); programs that read them (UCX, NCCL) will not see the device; \
                         --no-sysfs runs without them and without this warning",
                        Path::new(program).display()
                    ),
                    // Half-made: the program would see a namespace it should not (uid 0 in a
                    // user namespace), so it does not run.
                    Setup::Failed(err) => {
                        return Err(err.context(
                            "cannot make /dev/infiniband and /sys/class/infiniband for the \
                             program (--no-sysfs runs it without them)",
                        ));
                    }
                }
            }
        }
        Ok(None) => {}
        Err(err) => eprintln!("roce exec: warning: no device tree: {err}"),
    }
    let err = Command::new(program).args(rest).exec();
    eprintln!(
        "roce exec: cannot run {}: {err}",
        Path::new(program).display()
    );
    Ok(ExitCode::from(CANNOT_RUN))
}

/// Why the trees were not made.
enum Setup {
    /// No namespace could be made: nothing changed, the program may run without the trees.
    Refused(anyhow::Error),
    /// Something failed after the namespace was entered.
    Failed(anyhow::Error),
}

/// Steps 1 to 3 of the module's description.
fn enter(model: &DeviceModel) -> Result<(), Setup> {
    let (uid, gid) = (getuid(), getgid());
    // Root without CAP_SYS_ADMIN (a container's) takes the user namespace's way, as others do.
    let as_root = uid.is_root() && unshare(CloneFlags::CLONE_NEWNS).is_ok();
    if !as_root {
        unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS)
            .context("unshare(CLONE_NEWUSER | CLONE_NEWNS): user namespaces refused here")
            .map_err(Setup::Refused)?;
        map_ids(&format!("0 {uid} 1"), &format!("0 {gid} 1"), true).map_err(Setup::Failed)?;
    }
    let ndev = netdev_of(model);
    build(model, ndev.as_deref()).map_err(Setup::Failed)?;
    if !as_root {
        unshare(CloneFlags::CLONE_NEWUSER)
            .context("unshare(CLONE_NEWUSER) back to the caller's uid")
            .map_err(Setup::Failed)?;
        map_ids(&format!("{uid} 0 1"), &format!("{gid} 0 1"), false).map_err(Setup::Failed)?;
    }
    Ok(())
}

/// Writes this process's uid and gid maps in the user namespace it just entered. Without
/// CAP_SETGID in the parent namespace, a gid map needs `setgroups` denied first (the nested
/// namespace inherits the denial).
fn map_ids(uid_map: &str, gid_map: &str, deny_setgroups: bool) -> anyhow::Result<()> {
    if deny_setgroups {
        fs::write("/proc/self/setgroups", "deny").context("/proc/self/setgroups")?;
    }
    fs::write("/proc/self/uid_map", uid_map).with_context(|| format!("uid_map {uid_map:?}"))?;
    fs::write("/proc/self/gid_map", gid_map).with_context(|| format!("gid_map {gid_map:?}"))?;
    Ok(())
}

/// The interface that holds the device's address, or else the one whose network contains it
/// (the longest prefix: `lo`'s 127.0.0.0/8 for any 127.x); the raw backend's own interface.
fn netdev_of(model: &DeviceModel) -> Option<String> {
    if let Some(dev) = &model.spec.nic.dev {
        return Some(dev.clone());
    }
    let ip = u128::from_be_bytes(roce_wire::Gid::from_ip(model.spec.nic.ip).0);
    let v6 = model.spec.nic.ip.is_ipv6();
    nix::ifaddrs::getifaddrs()
        .ok()?
        .filter_map(|a| {
            // Both families compared as IPv6 (IPv4 in its ::ffff: form, its mask widened).
            let (addr, mask) = if v6 {
                (
                    u128::from(a.address?.as_sockaddr_in6()?.ip()),
                    u128::from(a.netmask?.as_sockaddr_in6()?.ip()),
                )
            } else {
                (
                    u128::from(a.address?.as_sockaddr_in()?.ip().to_ipv6_mapped()),
                    u128::from(u32::from(a.netmask?.as_sockaddr_in()?.ip())) | !0u128 << 32,
                )
            };
            (addr & mask == ip & mask).then_some((addr == ip, mask.count_ones(), a.interface_name))
        })
        .max_by_key(|(exact, prefix, _)| (*exact, *prefix))
        .map(|(_, _, name)| name)
}

/// Step 2: the two trees.
fn build(model: &DeviceModel, ndev: Option<&str>) -> anyhow::Result<()> {
    // Slave, not private: what the host mounts later still shows here; nothing goes back.
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_SLAVE,
        None::<&str>,
    )
    .context("making / a slave mount")?;
    let dev = fs::File::open("/dev").context("/dev")?;
    let dev_src = PathBuf::from(format!("/proc/self/fd/{}", dev.as_raw_fd()));
    let null = dev_src.join("null");
    if !fs::metadata(&null).is_ok_and(|m| m.file_type().is_char_device()) {
        bail!("/dev/null is not a character device");
    }
    // /sys/class first: binding /dev/null needs the host's /dev, which stays reachable
    // through `dev` after /dev is covered.
    overlay(
        Path::new("/sys/class"),
        &sysfs::sys_class(model, ndev),
        &null,
    )?;
    overlay(Path::new("/dev"), &sysfs::dev(model), &null)?;
    Ok(())
}

/// Covers `target` with a tmpfs holding the host's entries and `ours`, then makes it
/// read-only.
fn overlay(target: &Path, ours: &Tree, null: &Path) -> anyhow::Result<()> {
    let host = fs::File::open(target).with_context(|| target.display().to_string())?;
    let host_src = PathBuf::from(format!("/proc/self/fd/{}", host.as_raw_fd()));
    mount(
        Some("tmpfs"),
        target,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some("mode=0755"),
    )
    .with_context(|| format!("mounting a tmpfs on {}", target.display()))?;
    fill(target, Some(&host_src), ours, null)?;
    mount(
        None::<&str>,
        target,
        None::<&str>,
        MsFlags::MS_REMOUNT
            | MsFlags::MS_BIND
            | MsFlags::MS_RDONLY
            | MsFlags::MS_NOSUID
            | MsFlags::MS_NOEXEC,
        None::<&str>,
    )
    .with_context(|| format!("making {} read-only", target.display()))?;
    Ok(())
}

/// Fills the directory `dst` with the entries of the host's `host` (if any) and `ours`: ours
/// replace the host's of the same name, except a merging directory, which gets both.
fn fill(dst: &Path, host: Option<&Path>, ours: &Tree, null: &Path) -> anyhow::Result<()> {
    let mut done = std::collections::BTreeSet::new();
    if let Some(host) = host {
        for entry in fs::read_dir(host).with_context(|| host.display().to_string())? {
            let entry = entry?;
            let name = entry.file_name();
            let (src, to) = (host.join(&name), dst.join(&name));
            let kind = entry.file_type()?;
            match name.to_str().and_then(|n| ours.get(n)) {
                Some(Node::Dir {
                    merge: true,
                    entries,
                }) if kind.is_dir() => {
                    make_dir(&to)?;
                    fill(&to, Some(&src), entries, null)?;
                    done.insert(name.to_string_lossy().into_owned());
                }
                Some(_) => {} // ours replaces it
                None => {
                    // One entry the host has but we cannot show (a bind refused) is left out
                    // with a warning rather than keep the program from running.
                    if let Err(err) = keep(&src, &to, &kind) {
                        eprintln!(
                            "roce exec: warning: the program does not see {}: {err:#}",
                            to.display()
                        );
                    }
                }
            }
        }
    }
    for (name, node) in ours.iter().filter(|(n, _)| !done.contains(*n)) {
        let to = dst.join(name);
        match node {
            Node::Dir { entries, .. } => {
                make_dir(&to)?;
                fill(&to, None, entries, null)?;
            }
            Node::File(text) => {
                fs::write(&to, text).with_context(|| to.display().to_string())?;
                fs::set_permissions(&to, fs::Permissions::from_mode(0o444))?;
            }
            Node::Link(target) => {
                symlink(target, &to).with_context(|| to.display().to_string())?;
            }
            Node::NullDevice => {
                fs::File::create(&to).with_context(|| to.display().to_string())?;
                bind(null, &to)?;
            }
        }
    }
    Ok(())
}

/// Shows the host's entry `src` at `to`: a symbolic link copied, anything else bound.
fn keep(src: &Path, to: &Path, kind: &fs::FileType) -> anyhow::Result<()> {
    if kind.is_symlink() {
        symlink(fs::read_link(src)?, to).with_context(|| to.display().to_string())?;
        return Ok(());
    }
    if kind.is_dir() {
        make_dir(to)?;
    } else {
        fs::File::create(to).with_context(|| to.display().to_string())?;
    }
    bind(src, to)
}

fn make_dir(path: &Path) -> anyhow::Result<()> {
    fs::create_dir(path).with_context(|| path.display().to_string())?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o755))?;
    Ok(())
}

/// Binds `src` (with whatever is mounted under it) onto `to`. Recursive, as a user namespace
/// requires for a tree with mounts under it that the host locked.
fn bind(src: &Path, to: &Path) -> anyhow::Result<()> {
    mount(
        Some(src),
        to,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .with_context(|| format!("binding {} onto {}", src.display(), to.display()))
}
