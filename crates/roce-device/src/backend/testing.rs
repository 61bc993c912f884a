//! For tests that need a link: a network namespace of their own with a veth pair in it.

/// A network namespace holding a veth pair `x0`–`x1`, deleted on drop. `None`, with a note,
/// where namespaces cannot be made (not root).
pub(crate) struct Netns(pub(crate) String);

impl Netns {
    pub(crate) fn new(tag: &str) -> Option<Self> {
        let ip = |args: &[&str]| {
            std::process::Command::new("ip")
                .args(args)
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        let name = format!("roce-pkt-{tag}-{}", std::process::id());
        if !ip(&["netns", "add", &name]) {
            skipped("needs root and `ip` (a network namespace, raw sockets)");
            return None;
        }
        let ns = Self(name);
        assert!(ip(&[
            "-n", &ns.0, "link", "add", "x0", "type", "veth", "peer", "name", "x1"
        ]));
        for dev in ["x0", "x1"] {
            assert!(ip(&["-n", &ns.0, "link", "set", dev, "up"]));
        }
        Some(ns)
    }
}

impl Netns {
    /// Runs `f` on a thread of its own that enters the namespace (a thread changes only its
    /// own), and returns once it has, passing on its panic as it was.
    pub(crate) fn run(&self, f: impl FnOnce() + Send + 'static) {
        let name = self.0.clone();
        let ran = std::thread::spawn(move || {
            super::sys::enter_netns(&name).unwrap();
            f();
        })
        .join();
        if let Err(panic) = ran {
            std::panic::resume_unwind(panic);
        }
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["netns", "delete", &self.0])
            .status();
    }
}

/// Says that the running test skips, and why, on the process's own standard error, which
/// libtest does not capture, so that the skip shows in cargo's ordinary output (as
/// `roce_cabi::testing::say_skipped`, which this crate does not depend on).
pub(crate) fn skipped(why: &str) {
    use std::io::Write as _;
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("a test");
    let _ = writeln!(std::io::stderr().lock(), "*** SKIPPED {test}: {why} ***");
}

/// The wake-up contract of [`super::Backend::wake_on_datagrams`], on `backend` and the
/// receiver it handed out: told not to wake its task (twice: the change is idempotent), the
/// backend is not ready when `arrive` brings a datagram; told again (twice), it is, and `rx`
/// receives that datagram, whose payload is `payload`.
pub(crate) async fn check_wake_on_datagrams(
    backend: &mut impl super::Backend,
    rx: &mut dyn super::Receiver,
    arrive: impl FnOnce(),
    payload: &[u8],
) {
    let wait = std::time::Duration::from_millis(200);
    backend.wake_on_datagrams(false).unwrap();
    backend.wake_on_datagrams(false).unwrap();
    arrive();
    let woke = tokio::time::timeout(wait, backend.when_readable(|| Ok(false))).await;
    assert!(woke.is_err(), "the datagram woke the task");
    backend.wake_on_datagrams(true).unwrap();
    backend.wake_on_datagrams(true).unwrap();
    let (mut buf, mut out) = (vec![0u8; rx.buffer_len()], Vec::new());
    tokio::time::timeout(
        wait,
        backend.when_readable(|| rx.try_recv(&mut buf, &mut out)),
    )
    .await
    .expect("the datagram that came meanwhile was missed")
    .unwrap();
    assert_eq!(out.len(), 1, "the datagram, received");
    assert_eq!(&buf[out[0].offset..][..out[0].len], payload);
}

/// A test batch with lent payloads: `len` bytes of 0xee, and `loans` (each: its place in the
/// batch, its offset in `memory`, its bytes) lent from `memory`, whose bytes are `region`.
/// Returns the loans, the batch, and the bytes a send of it must carry.
pub(crate) fn lent_batch(
    memory: &std::sync::Arc<dyn roce_core::RegionMemory>,
    region: &[u8],
    len: usize,
    loans: &[(usize, usize, usize)],
) -> (Vec<roce_core::Loan>, Vec<u8>, Vec<u8>) {
    let loans: Vec<roce_core::Loan> = loans
        .iter()
        .map(|&(at, offset, n)| roce_core::Loan::new(memory, offset, n, at).unwrap())
        .collect();
    let payload = vec![0xee; len];
    let mut expected = payload.clone();
    for loan in &loans {
        let offset = loan.addr() - memory.address().unwrap();
        expected[loan.at..loan.at + loan.len].copy_from_slice(&region[offset..offset + loan.len]);
    }
    (loans, payload, expected)
}
