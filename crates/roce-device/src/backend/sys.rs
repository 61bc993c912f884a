//! The system calls of an AF_PACKET socket with a receive ring, and the registration of sockets
//! with tokio's reactor: the one module of this crate that needs `unsafe`. Everything here is a thin wrapper whose safety argument fits in a
//! comment; what the bytes mean is read (safely) in [`super::packet_socket`].
//!
//! The kernel's side is described in Documentation/networking/packet_mmap.rst: a ring of
//! `tp_frame_nr` slots of `tp_frame_size` bytes (`struct tpacket_req`), shared through `mmap`;
//! each slot starts with a `struct tpacket2_hdr` whose `tp_status` says who owns it
//! (`TP_STATUS_KERNEL`: the kernel may fill it; `TP_STATUS_USER`: it holds a frame for us,
//! until we hand it back).

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use nix::libc;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// Registers a packet socket's descriptor with tokio's reactor, for reading: the raw
/// backend's task waits on it while the ring itself is read by whichever thread holds it
/// (`packet_socket::Receiver`). Must be called inside a tokio runtime.
pub(crate) fn register(
    fd: std::sync::Arc<PacketFd>,
) -> io::Result<AsyncFd<std::sync::Arc<PacketFd>>> {
    // SAFETY: a `PacketFd` owns its descriptor and closes it only when dropped; the `Arc`
    // inside the `AsyncFd` keeps it alive, and it is never replaced, so the descriptor stays
    // open and the same for the `AsyncFd`'s whole life.
    Ok(unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }?)
}

/// Registers a UDP socket with tokio's reactor, for reading. Must be called inside
/// a tokio runtime.
pub(crate) fn register_udp(
    socket: std::net::UdpSocket,
) -> io::Result<AsyncFd<std::net::UdpSocket>> {
    // Readable only: sends never wait on the runtime (`UdpSender` polls a full buffer out),
    // and a writable interest would make every send's freed buffer an edge that returns the
    // runtime's `epoll_wait` once more for nothing.
    // SAFETY: a `std::net::UdpSocket` owns its descriptor and closes it only when dropped; it
    // lives inside the `AsyncFd`, which never replaces it, so the descriptor stays open and the
    // same for the `AsyncFd`'s whole life.
    Ok(unsafe { AsyncFd::register_with_interest(socket, Interest::READABLE) }?)
}

/// Sets `UDP_NO_CHECK6_RX` (<linux/udp.h>) on a UDP socket: IPv6 datagrams with a zero UDP
/// checksum are taken instead of dropped.
pub(crate) fn set_udp_no_check6_rx(socket: &std::net::UdpSocket) -> io::Result<()> {
    let on: libc::c_int = 1;
    // SAFETY: a valid descriptor, and an int option passed with its size.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_UDP,
            libc::UDP_NO_CHECK6_RX,
            (&raw const on).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Attaches `program` to the `SO_REUSEPORT` group of `socket` (`SO_ATTACH_REUSEPORT_CBPF`): the
/// kernel runs it on each datagram's UDP payload and delivers the datagram to the socket whose
/// index in the group it returns ([`super::steer`]). It replaces the group's program, whichever
/// member attaches it.
pub(crate) fn attach_reuseport_cbpf(
    socket: &impl AsRawFd,
    program: &[libc::sock_filter],
) -> io::Result<()> {
    let len = u16::try_from(program.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a BPF program too long"))?;
    let fprog = libc::sock_fprog {
        len,
        filter: program.as_ptr().cast_mut(),
    };
    // SAFETY: a valid descriptor; `fprog` points at `len` instructions that live for the call
    // (the kernel copies the program in before it returns).
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_REUSEPORT_CBPF,
            (&raw const fprog).cast(),
            size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Closes every descriptor from 3 up (`close_range(2)`), for a process that must keep none of
/// what it inherited: the agent of a shared address, which the first process to use the address
/// starts and which outlives it. Its parent's descriptors without close-on-exec (an MPI rank
/// has a dozen: its launcher's sockets and pipes) would otherwise stay open as long as the
/// agent runs, and a launcher that waits for them to close would wait for the agent. To be
/// called before the process opens anything of its own. A kernel older than 5.9 has no
/// `close_range`: the descriptors `/proc/self/fd` lists are closed one by one instead.
pub(crate) fn close_inherited_descriptors() -> io::Result<()> {
    // SAFETY: the caller owns no descriptor from 3 up yet, so none that Rust code holds is
    // closed behind its back; the call takes plain integers.
    let rc = unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) };
    if rc == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() != Some(libc::ENOSYS) {
        return Err(err);
    }
    // Listed first, closed after: the listing's own descriptor is gone by then, and closing
    // it again fails harmlessly (EBADF).
    let fds: Vec<i32> = std::fs::read_dir("/proc/self/fd")?
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&fd| fd > 2)
        .collect();
    for fd in fds {
        // SAFETY: as above; a descriptor that is no longer open is refused with EBADF.
        unsafe { libc::close(fd) };
    }
    Ok(())
}

/// Sends `message` on the Unix socket `socket` with `fds` attached (`SCM_RIGHTS`).
pub(crate) fn send_with_fds(
    socket: &impl AsRawFd,
    message: &[u8],
    fds: &[RawFd],
) -> io::Result<()> {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    let iov = [io::IoSlice::new(message)];
    let cmsgs: &[ControlMessage<'_>] = if fds.is_empty() {
        &[]
    } else {
        &[ControlMessage::ScmRights(fds)]
    };
    sendmsg::<()>(socket.as_raw_fd(), &iov, cmsgs, MsgFlags::empty(), None)?;
    Ok(())
}

/// Receives one message from the Unix socket `socket` into `buf`, with the descriptors
/// attached to it (at most 4), which the caller then owns. `Ok((0, _))`: the peer closed.
pub(crate) fn recv_with_fds(
    socket: &impl AsRawFd,
    buf: &mut [u8],
) -> io::Result<(usize, Vec<OwnedFd>)> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    let mut space = nix::cmsg_space!([RawFd; 4]);
    let mut iov = [io::IoSliceMut::new(buf)];
    let msg = recvmsg::<()>(
        socket.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )?;
    let mut fds = Vec::new();
    for cmsg in msg.cmsgs()? {
        if let ControlMessageOwned::ScmRights(raw) = cmsg {
            // SAFETY: the kernel installed these descriptors in this process for this message
            // (SCM_RIGHTS); nothing else holds them, so each is owned here alone.
            fds.extend(
                raw.into_iter()
                    .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
            );
        }
    }
    Ok((msg.bytes, fds))
}

/// Moves the calling thread into the network namespace `/var/run/netns/NAME` (`setns(2)`): for
/// tests that open packet sockets on the interfaces of a namespace they made.
#[cfg(test)]
pub(crate) fn enter_netns(name: &str) -> io::Result<()> {
    let file = std::fs::File::open(format!("/var/run/netns/{name}"))?;
    // SAFETY: setns(2) takes a descriptor, open for the call, and a flag; it changes only the
    // calling thread's network namespace.
    if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// An AF_PACKET `SOCK_RAW` socket that receives nothing until [`PacketFd::bind`].
#[derive(Debug)]
pub(crate) struct PacketFd(OwnedFd);

impl PacketFd {
    /// `socket(AF_PACKET, SOCK_RAW, 0)`: protocol 0 so that no frame of any interface is
    /// queued before the socket is bound to one (packet(7)).
    pub(crate) fn new() -> io::Result<Self> {
        // SAFETY: socket(2) takes no pointers; a non-negative result is a new descriptor that
        // nothing else owns, so OwnedFd may take it.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by socket(2) and is owned by no one else.
        Ok(Self(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// `setsockopt(SOL_PACKET, option, value)` for an option that takes an int.
    pub(crate) fn set_packet_int(&self, option: libc::c_int, value: libc::c_int) -> io::Result<()> {
        self.set_option(libc::SOL_PACKET, option, &value)
    }

    /// `setsockopt(SOL_SOCKET, option, value)` for an option that takes an int.
    pub(crate) fn set_socket_int(&self, option: libc::c_int, value: libc::c_int) -> io::Result<()> {
        self.set_option(libc::SOL_SOCKET, option, &value)
    }

    /// Joins the interface's promiscuous membership (`PACKET_ADD_MEMBERSHIP`,
    /// `PACKET_MR_PROMISC`): the interface passes up frames for any MAC while the socket lives.
    pub(crate) fn add_promiscuous(&self, ifindex: u32) -> io::Result<()> {
        let request = libc::packet_mreq {
            mr_ifindex: ifindex_int(ifindex)?,
            mr_type: libc::PACKET_MR_PROMISC as u16,
            mr_alen: 0,
            mr_address: [0; 8],
        };
        self.set_option(libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &request)
    }

    /// Sets up the receive ring (`PACKET_RX_RING` with a `tpacket_req`) and maps it. The
    /// socket must use `TPACKET_V2` already (`PACKET_VERSION`).
    pub(crate) fn rx_ring(&self, request: &libc::tpacket_req) -> io::Result<RxRing> {
        self.set_option(libc::SOL_PACKET, libc::PACKET_RX_RING, request)?;
        let len = request.tp_block_size as usize * request.tp_block_nr as usize;
        // SAFETY: a fresh shared mapping chosen by the kernel (no address given) of the ring
        // just configured on our descriptor; nothing aliases it yet. The result is checked.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                self.0.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(ptr.cast::<u8>()).ok_or_else(|| io::Error::other("mmap: null"))?;
        Ok(RxRing {
            base,
            len,
            frame_size: request.tp_frame_size as usize,
            frame_nr: request.tp_frame_nr as usize,
        })
    }

    /// Binds the socket to `ifindex` for every protocol (`ETH_P_ALL`): from now on it
    /// receives the interface's frames, and sends go out on it.
    pub(crate) fn bind(&self, ifindex: u32) -> io::Result<()> {
        // SAFETY: sockaddr_ll is plain data for which all zeroes is a valid value.
        let mut address: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        address.sll_family = libc::AF_PACKET as u16;
        address.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        address.sll_ifindex = ifindex_int(ifindex)?;
        // SAFETY: the pointer and length describe `address`, alive for the call.
        let result = unsafe {
            libc::bind(
                self.0.as_raw_fd(),
                std::ptr::from_ref(&address).cast::<libc::sockaddr>(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if result < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// The kernel's counters since the last call (`PACKET_STATISTICS`, which resets them):
    /// frames that reached the socket, and frames dropped because the ring was full.
    pub(crate) fn statistics(&self) -> io::Result<libc::tpacket_stats> {
        let mut stats = libc::tpacket_stats {
            tp_packets: 0,
            tp_drops: 0,
        };
        let mut len = size_of::<libc::tpacket_stats>() as libc::socklen_t;
        // SAFETY: the pointers describe `stats` and `len`, alive and writable for the call;
        // the kernel writes at most `len` bytes.
        let result = unsafe {
            libc::getsockopt(
                self.0.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                std::ptr::from_mut(&mut stats).cast(),
                &mut len,
            )
        };
        if result < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(stats)
    }

    /// Waits up to `timeout_ms` for something to read (a ring slot or a queued frame).
    pub(crate) fn wait_readable(&self, timeout_ms: i32) -> io::Result<bool> {
        let mut entry = libc::pollfd {
            fd: self.0.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd, alive and writable for the call.
        let result = unsafe { libc::poll(&mut entry, 1, timeout_ms) };
        if result < 0 {
            let err = io::Error::last_os_error();
            return if err.kind() == io::ErrorKind::Interrupted {
                Ok(false)
            } else {
                Err(err)
            };
        }
        Ok(result > 0)
    }

    fn set_option<T>(&self, level: libc::c_int, option: libc::c_int, value: &T) -> io::Result<()> {
        // SAFETY: the pointer and length describe `value`, alive for the call; every caller
        // passes the type the kernel expects for `option` (int, packet_mreq, tpacket_req).
        let result = unsafe {
            libc::setsockopt(
                self.0.as_raw_fd(),
                level,
                option,
                std::ptr::from_ref(value).cast(),
                size_of::<T>() as libc::socklen_t,
            )
        };
        if result < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl AsFd for PacketFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

impl AsRawFd for PacketFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

fn ifindex_int(ifindex: u32) -> io::Result<libc::c_int> {
    libc::c_int::try_from(ifindex)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface index out of range"))
}

/// The mapped receive ring: `frame_nr` slots of `frame_size` bytes, unmapped on drop.
///
/// A slot belongs to us while its status word says `TP_STATUS_USER`; we read its bytes only
/// then, and hand it back by storing `TP_STATUS_KERNEL`. The status word is accessed
/// atomically: the kernel writes the frame, then (after a write barrier) the status, so an
/// acquire load that sees `TP_STATUS_USER` sees the frame too.
#[derive(Debug)]
pub(crate) struct RxRing {
    base: NonNull<u8>,
    len: usize,
    frame_size: usize,
    frame_nr: usize,
}

// SAFETY: the ring is plain memory shared with the kernel, not with other threads of ours; the
// owner (one receiver) moves it between threads, never shares it.
unsafe impl Send for RxRing {}

impl RxRing {
    /// Number of slots.
    pub(crate) fn frame_nr(&self) -> usize {
        self.frame_nr
    }

    /// Slot `index`'s status word (`tp_status`, the first field of `tpacket2_hdr`).
    fn status_word(&self, index: usize) -> &AtomicU32 {
        let offset = (index % self.frame_nr) * self.frame_size;
        // SAFETY: `offset` is inside the mapping (index reduced modulo the slot count) and a
        // multiple of the slot size, which the kernel requires to be a multiple of 16, so the
        // word is aligned; the mapping lives as long as `self`, and the kernel also only
        // accesses this word atomically (with barriers).
        unsafe { &*self.base.as_ptr().add(offset).cast::<AtomicU32>() }
    }

    /// Slot `index`'s status.
    pub(crate) fn status(&self, index: usize) -> u32 {
        self.status_word(index).load(Ordering::Acquire)
    }

    /// Slot `index`'s bytes (header, then the frame at `tp_mac`), if the slot is ours: `None`
    /// unless its status says `TP_STATUS_USER`. `&mut self` keeps the slice from outliving
    /// [`RxRing::release`].
    pub(crate) fn slot(&mut self, index: usize) -> Option<&[u8]> {
        if self.status(index) & libc::TP_STATUS_USER == 0 {
            return None;
        }
        let offset = (index % self.frame_nr) * self.frame_size;
        // SAFETY: the range is inside the mapping (index reduced modulo the slot count); the
        // acquire load above saw TP_STATUS_USER, so the kernel has written the slot and does not
        // write it again until it is released, which needs `&mut self` and so ends this borrow.
        Some(unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(offset), self.frame_size) })
    }

    /// Hands slot `index` back to the kernel.
    pub(crate) fn release(&mut self, index: usize) {
        self.status_word(index)
            .store(libc::TP_STATUS_KERNEL, Ordering::Release);
    }
}

impl Drop for RxRing {
    fn drop(&mut self) {
        // SAFETY: exactly the mapping made in `PacketFd::rx_ring`; no slice into it outlives
        // `self` (they borrow it).
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}

/// One control message of [`send_to`]: its level, its type and its data.
pub(crate) struct Cmsg<'a> {
    pub(crate) level: libc::c_int,
    pub(crate) kind: libc::c_int,
    pub(crate) data: &'a [u8],
}

/// Room for the control messages of one send: a TOS or traffic class, a segment size and an
/// IPv6 source address (24 + 24 + 40 bytes), aligned for `struct cmsghdr`.
#[repr(C, align(8))]
struct CmsgBuffer([u8; 128]);

/// Bytes that a [`send_to`] gathers: where they lie in this process, and how many.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Piece {
    pub(crate) addr: usize,
    pub(crate) len: usize,
}

impl Piece {
    /// No bytes: room for a piece filled in later.
    pub(crate) const EMPTY: Self = Self { addr: 0, len: 0 };

    /// The bytes of `bytes`.
    pub(crate) fn of(bytes: &[u8]) -> Self {
        Self {
            addr: bytes.as_ptr() as usize,
            len: bytes.len(),
        }
    }
}

/// The most pieces one [`send_to`] gathers.
pub(crate) const MAX_PIECES: usize = 256;

/// Writes an iovec for each of `pieces` into the front of `iov`, as many as fit; returns how
/// many it wrote.
fn fill_iovecs(
    iov: &mut [std::mem::MaybeUninit<libc::iovec>],
    pieces: impl Iterator<Item = Piece>,
) -> usize {
    iov.iter_mut()
        .zip(pieces)
        .map(|(iov, piece)| {
            iov.write(libc::iovec {
                iov_base: piece.addr as *mut libc::c_void,
                iov_len: piece.len,
            })
        })
        .count()
}

/// `writev` of `header`, then `pieces` one after the other: one frame on a packet socket,
/// one system call and no allocation. More than [`MAX_PIECES`] pieces are refused with
/// `EINVAL` before anything is written; each piece must stay valid until the call returns,
/// as for [`send_to`].
pub(crate) fn write_pieces(
    fd: BorrowedFd<'_>,
    header: &[u8],
    pieces: &[Piece],
) -> nix::Result<usize> {
    if pieces.len() > MAX_PIECES {
        return Err(nix::errno::Errno::EINVAL);
    }
    // Only the first `pieces.len() + 1` entries are written, and only they are given.
    let mut iov = [const { std::mem::MaybeUninit::<libc::iovec>::uninit() }; MAX_PIECES + 1];
    let count = fill_iovecs(
        &mut iov,
        std::iter::once(Piece::of(header)).chain(pieces.iter().copied()),
    );
    // SAFETY: a valid descriptor; the first `count` iovecs are initialised and point at
    // memory of this process that lives for the call, which the kernel only reads (refusing
    // with EFAULT what it cannot).
    let written =
        unsafe { libc::writev(fd.as_raw_fd(), iov.as_ptr().cast(), count as libc::c_int) };
    nix::errno::Errno::result(written).map(|n| n as usize)
}

/// `sendmsg` of `pieces`, one after the other, to `dst` with `cmsgs`, one system call and no
/// allocation (nix's `sendmsg` allocates its control buffer at every call: two heap
/// operations per packet sent on a ping-pong's path). More than [`MAX_PIECES`] pieces, or
/// control messages that do not fit the buffer, are refused with `EINVAL` before anything is
/// sent. The kernel reads the pieces during the call: each must be memory of this process
/// that stays valid until it returns (a piece that is not is refused with `EFAULT`, by the
/// kernel's copy, and nothing is sent).
pub(crate) fn send_to(
    fd: BorrowedFd<'_>,
    pieces: &[Piece],
    dst: &nix::sys::socket::SockaddrStorage,
    cmsgs: &[Cmsg<'_>],
) -> nix::Result<usize> {
    use nix::sys::socket::SockaddrLike;
    let mut buffer = CmsgBuffer([0; 128]);
    // SAFETY: CMSG_SPACE only computes a length.
    let space: usize = cmsgs
        .iter()
        .map(|c| unsafe { libc::CMSG_SPACE(c.data.len() as libc::c_uint) } as usize)
        .sum();
    if space > buffer.0.len() {
        return Err(nix::errno::Errno::EINVAL);
    }
    if pieces.len() > MAX_PIECES {
        return Err(nix::errno::Errno::EINVAL);
    }
    // Only the first `pieces.len()` entries are written, and only they are given.
    let mut iov = [const { std::mem::MaybeUninit::<libc::iovec>::uninit() }; MAX_PIECES];
    fill_iovecs(&mut iov, pieces.iter().copied());
    // SAFETY: an all-zero msghdr is a valid one (no name, no iovec, no control).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = dst.as_ptr().cast_mut().cast();
    msg.msg_namelen = dst.len();
    msg.msg_iov = iov.as_mut_ptr().cast();
    msg.msg_iovlen = pieces.len();
    if !cmsgs.is_empty() {
        msg.msg_control = buffer.0.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        // SAFETY: the control buffer is `space` bytes of `buffer`, aligned for cmsghdr, and
        // holds exactly the CMSG_SPACE of each message, so CMSG_FIRSTHDR/CMSG_NXTHDR walk one
        // header per message inside it and CMSG_DATA has `data.len()` bytes behind it.
        unsafe {
            let mut header = libc::CMSG_FIRSTHDR(&raw const msg);
            for c in cmsgs {
                (*header).cmsg_level = c.level;
                (*header).cmsg_type = c.kind;
                (*header).cmsg_len = libc::CMSG_LEN(c.data.len() as libc::c_uint) as _;
                std::ptr::copy_nonoverlapping(
                    c.data.as_ptr(),
                    libc::CMSG_DATA(header),
                    c.data.len(),
                );
                header = libc::CMSG_NXTHDR(&raw const msg, header);
            }
        }
    }
    // SAFETY: a valid descriptor; the message's name, iovec array and control point at memory
    // that lives for the call (the kernel copies them in before it returns). The pieces are
    // only read, by the kernel, which refuses with EFAULT what it cannot read.
    let sent = unsafe { libc::sendmsg(fd.as_raw_fd(), &raw const msg, 0) };
    nix::errno::Errno::result(sent).map(|n| n as usize)
}
