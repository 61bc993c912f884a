//! `roce exec` shows the program the device as the kernel would: `/dev/infiniband/uverbsN` a
//! read-writable character device, `/sys/class/infiniband/<name>/` and
//! `/sys/class/infiniband_verbs/uverbsN/` with the values verbs report, while the program keeps
//! its uid and the host's /dev and /sys stay as they were. Each test runs as the user that runs
//! the tests and, when that is root, also as `nobody` (through `setpriv`), the way without
//! privileges (a user namespace). Addresses in 127.0.71.0/24.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

mod common;

use common::exec::have;
use std::net::Ipv6Addr;
use std::process::{Command, Output};

/// Who runs `roce exec`.
#[derive(Debug, Clone, Copy)]
enum As {
    /// The user running the tests.
    Caller,
    /// `nobody` (65534), through `setpriv`: only when the tests run as root.
    Nobody,
}

fn caller_uid() -> u32 {
    let text = std::fs::read_to_string("/proc/self/status").unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap()
        .parse()
        .unwrap()
}

/// The users to run as here: the caller, and `nobody` if the caller is root and has setpriv.
fn users() -> Vec<(As, u32)> {
    let mut users = vec![(As::Caller, caller_uid())];
    if caller_uid() != 0 {
        roce_cabi::testing::say_skipped(
            "not root: the root case (a mount namespace without a user namespace) is not run",
        );
    } else if have("setpriv", "util-linux") {
        users.push((As::Nobody, 65534));
    }
    users
}

/// `roce exec ARGS` as `who`.
fn roce_as(who: As, args: &[&str]) -> Output {
    let roce = env!("CARGO_BIN_EXE_roce");
    let mut cmd = match who {
        As::Caller => Command::new(roce),
        As::Nobody => {
            let mut c = Command::new("setpriv");
            c.args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--",
                roce,
            ]);
            c
        }
    };
    cmd.args(args).output().unwrap()
}

/// Runs `script` under `sh -c` through `roce exec` as `who`; its standard output. `exec_args`
/// may end with `--` and a command that runs the shell (another `roce exec`).
fn sh_as(who: As, exec_args: &[&str], script: &str) -> String {
    let mut args = vec!["exec"];
    args.extend_from_slice(exec_args);
    if !exec_args.contains(&"--") {
        args.push("--");
    }
    args.extend_from_slice(&["sh", "-c", script]);
    let out = roce_as(who, &args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{who:?} {args:?}: {:?}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The host's view: whether the trees exist, and every mount on them.
fn host_view() -> (bool, bool, Vec<String>) {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter_map(|l| l.split(' ').nth(4).map(str::to_owned))
        .filter(|m| m.starts_with("/sys/class/") || m.starts_with("/dev/infiniband"))
        .collect();
    (
        std::path::Path::new("/dev/infiniband/uverbs0").exists(),
        std::path::Path::new("/sys/class/infiniband/roce0").exists(),
        mounts,
    )
}

#[test]
fn the_program_sees_a_read_writable_uverbs_node_and_roce_v2_gids_under_its_own_uid() {
    let before = host_view();
    for (who, uid) in users() {
        let out = sh_as(
            who,
            &["--ip", "127.0.71.1"],
            "id -u; stat -c %F /dev/infiniband/uverbs0 /dev/infiniband/rdma_cm; \
             if [ -r /dev/infiniband/uverbs0 ] && [ -w /dev/infiniband/uverbs0 ]; then echo rw; else echo not-rw; fi; \
             P=/sys/class/infiniband/roce0/ports/1; \
             cat $P/gid_attrs/types/0 $P/gid_attrs/types/1 $P/gid_attrs/ndevs/1 $P/state $P/link_layer; \
             cat /sys/class/infiniband_verbs/uverbs0/ibdev; \
             ls /sys/class/infiniband/roce0/device/net; \
             ls /sys/class/net | grep -x lo",
        );
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines,
            [
                uid.to_string().as_str(),
                "character special file",
                "character special file",
                "rw",
                "RoCE v2",
                "RoCE v2",
                "lo",
                "4: ACTIVE",
                "Ethernet",
                "roce0",
                "lo",
                "lo",
            ],
            "as {who:?}:\n{out}"
        );
        // The program has no capabilities it did not have: nobody ends with none.
        if uid != 0 {
            let caps = sh_as(
                who,
                &["--ip", "127.0.71.1"],
                "grep CapEff /proc/self/status",
            );
            assert_eq!(caps.trim(), "CapEff:\t0000000000000000", "as {who:?}");
        }
    }
    assert_eq!(host_view(), before, "the host's /dev or /sys changed");
}

#[test]
fn sysfs_shows_the_guid_and_gids_that_ibv_devinfo_reports() {
    if !have("ibv_devinfo", "ibverbs-utils") {
        return;
    }
    for (who, _) in users() {
        let out = sh_as(
            who,
            &["--ip", "127.0.71.2", "--name", "rxe7"],
            "ibv_devinfo -v -d rxe7; echo ====; D=/sys/class/infiniband/rxe7; \
             cat $D/node_guid $D/sys_image_guid $D/ports/1/gids/0 $D/ports/1/gids/1 $D/ports/1/gids/2",
        );
        let (devinfo, sysfs) = out.split_once("====\n").unwrap();
        let field = |key: &str| {
            devinfo
                .lines()
                .find_map(|l| l.trim().strip_prefix(&format!("{key}:")))
                .unwrap_or_else(|| panic!("no {key} in\n{devinfo}"))
                .trim()
                .to_owned()
        };
        let sysfs: Vec<&str> = sysfs.lines().collect();
        assert_eq!(sysfs[0], field("node_guid"), "{out}");
        assert_eq!(sysfs[1], field("sys_image_guid"), "{out}");
        let gid = |text: &str| text.split(',').next().unwrap().trim().parse::<Ipv6Addr>();
        for i in 0..2 {
            let reported = field(&format!("GID[{i:>3}]"));
            assert_eq!(gid(sysfs[2 + i]), gid(&reported), "GID {i}: {out}");
            assert!(reported.ends_with("RoCE v2"), "{reported}");
        }
        assert_eq!(gid(sysfs[4]), Ok(Ipv6Addr::UNSPECIFIED), "{out}");
        assert_eq!(gid(sysfs[3]), Ok("::ffff:127.0.71.2".parse().unwrap()));
    }
}

#[test]
fn no_sysfs_runs_the_program_in_the_caller_s_namespaces() {
    let own_ns = std::fs::read_link("/proc/self/ns/mnt").unwrap();
    let script =
        "readlink /proc/self/ns/mnt; if [ -e /dev/infiniband/uverbs0 ]; then echo node; fi";
    let with = sh_as(As::Caller, &["--ip", "127.0.71.3"], script);
    assert_ne!(with.lines().next(), own_ns.to_str(), "{with}");
    assert_eq!(with.lines().nth(1), Some("node"), "{with}");
    let without = sh_as(As::Caller, &["--ip", "127.0.71.3", "--no-sysfs"], script);
    assert_eq!(without.lines().next(), own_ns.to_str(), "{without}");
    if !std::path::Path::new("/dev/infiniband/uverbs0").exists() {
        assert_eq!(without.lines().nth(1), None, "{without}");
    }
}

#[test]
fn a_program_that_cannot_be_run_is_named_with_a_shell_s_status() {
    for (who, _) in users() {
        let out = roce_as(
            who,
            &["exec", "--ip", "127.0.71.4", "--", "/nonexistent/program"],
        );
        assert_eq!(out.status.code(), Some(127), "{who:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("cannot run /nonexistent/program"), "{err}");
    }
}

#[test]
fn ucx_keeps_the_device_with_rc_and_ud_verbs() {
    if !have("ucx_info", "ucx-utils") {
        return;
    }
    // The transports listed on roce0:1.
    let transports = |out: &Output| {
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut found = Vec::new();
        let mut transport = "";
        for line in text.lines() {
            if let Some(t) = line.trim().strip_prefix("#      Transport: ") {
                transport = t;
            } else if line.contains("Device: roce0:1") {
                found.push(transport.to_owned());
            }
        }
        found
    };
    for (who, _) in users() {
        let out = roce_as(who, &["exec", "--ip", "127.0.71.5", "--", "ucx_info", "-d"]);
        assert!(out.status.success(), "{who:?}: {out:?}");
        let found = transports(&out);
        assert!(
            found.contains(&"rc_verbs".to_owned()) && found.contains(&"ud_verbs".to_owned()),
            "as {who:?}: {found:?}\n{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    // Without the node, UCX drops the device.
    let out = roce_as(
        As::Caller,
        &[
            "exec",
            "--ip",
            "127.0.71.5",
            "--no-sysfs",
            "--",
            "ucx_info",
            "-d",
        ],
    );
    if !std::path::Path::new("/dev/infiniband/uverbs0").exists() {
        assert_eq!(transports(&out), Vec::<String>::new());
    }
}

#[test]
fn a_device_already_there_stays_visible_and_ours_takes_the_next_uverbs_node() {
    // The outer roce exec plays the host with a device of its own (mlx5_0 on uverbs0).
    let roce = env!("CARGO_BIN_EXE_roce");
    for (who, _) in users() {
        let out = sh_as(
            who,
            &[
                "--name",
                "mlx5_0",
                "--ip",
                "127.0.71.6",
                "--",
                roce,
                "exec",
                "--ip",
                "127.0.71.7",
                "--",
            ],
            "ls /dev/infiniband /sys/class/infiniband; \
             cat /sys/class/infiniband_verbs/uverbs0/ibdev /sys/class/infiniband_verbs/uverbs1/ibdev; \
             stat -c %F /dev/infiniband/uverbs1",
        );
        let lines: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
        assert_eq!(
            lines,
            [
                "/dev/infiniband:",
                "rdma_cm",
                "uverbs0",
                "uverbs1",
                "/sys/class/infiniband:",
                "mlx5_0",
                "roce0",
                "mlx5_0",
                "roce0",
                "character special file",
            ],
            "as {who:?}:\n{out}"
        );
    }
}

/// Runs its arguments as uid and gid 65534 in a user namespace (ids 0 to 65535 mapped onto
/// themselves) that may create no user namespace of its own: a container that refuses them.
/// The host's limit is not touched (`user.max_user_namespaces` is per user namespace).
const WITHOUT_USER_NAMESPACES: &str = r#"
# Runs argv[1:] as uid/gid 65534 in a user namespace (root's ids mapped onto themselves) whose
# own user namespaces are limited to none: where a container refuses user namespaces.
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWUSER = 0x10000000
ready_r, ready_w = os.pipe()
go_r, go_w = os.pipe()
pid = os.fork()
if pid == 0:
    if libc.unshare(CLONE_NEWUSER) != 0:
        sys.exit("unshare: " + os.strerror(ctypes.get_errno()))
    os.write(ready_w, b"u")
    os.read(go_r, 1)
    with open("/proc/sys/user/max_user_namespaces", "w") as f:
        f.write("0")
    os.setgroups([])
    os.setgid(65534)
    os.setuid(65534)
    os.execvp(sys.argv[1], sys.argv[1:])
os.read(ready_r, 1)
for m in ("uid_map", "gid_map"):
    with open(f"/proc/{pid}/{m}", "w") as f:
        f.write("0 0 65536")
os.write(go_w, b"g")
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"#;

#[test]
fn where_user_namespaces_are_refused_the_program_runs_without_the_trees_and_a_warning() {
    if caller_uid() != 0 {
        roce_cabi::testing::say_skipped("not root: cannot map the ids of a user namespace");
        return;
    }
    if !have("python3", "python3") {
        return;
    }
    let out = Command::new("python3")
        .args(["-c", WITHOUT_USER_NAMESPACES, env!("CARGO_BIN_EXE_roce")])
        .args(["exec", "--ip", "127.0.71.8", "--", "sh", "-c"])
        .arg("id -u; if [ -e /sys/class/infiniband/roce0 ]; then echo tree; fi")
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{out:?}");
    assert_eq!(stdout, "65534\n", "{stderr}");
    assert!(
        stderr.contains("roce exec: warning: no /dev/infiniband or /sys/class/infiniband for sh")
            && stderr.contains("--no-sysfs"),
        "{stderr}"
    );
}
