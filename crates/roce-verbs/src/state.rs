//! The process's device and its open contexts (safe code: raw addresses are only compared and
//! stored as integers here; `ffi.rs` turns them into pointers).

use std::collections::BTreeMap;
use std::ffi::c_int;
use std::fmt::Write as _;
use std::sync::{Mutex, MutexGuard, Once, OnceLock, PoisonError};

use crate::abi::{self, IbvContext, IbvContextOps, IbvDevice, QueryPortFn, VerbsContext};
use crate::config::{DeviceSpec, EnvError};
use crate::device::DeviceModel;
use crate::engine::Engine;
use roce_cabi::CBox;

/// An errno value (`EINVAL`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Errno(pub(crate) c_int);

/// The device of this process.
#[derive(Debug)]
pub(crate) struct Device {
    /// What it shows.
    pub(crate) model: DeviceModel,
    /// The `struct ibv_device` that `ibv_get_device_list` hands out; lives as long as the process.
    pub(crate) c_device: CBox<IbvDevice>,
    /// The NIC, started by the first `ibv_open_device`.
    engine: OnceLock<Result<Engine, String>>,
}

/// The functions the application's inline verbs call through its context.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ContextFns {
    pub(crate) query_port: QueryPortFn,
    pub(crate) query_device_ex: abi::QueryDeviceExFn,
    pub(crate) poll_cq: *const std::ffi::c_void,
    pub(crate) req_notify_cq: *const std::ffi::c_void,
    pub(crate) post_send: *const std::ffi::c_void,
    pub(crate) post_recv: *const std::ffi::c_void,
    pub(crate) post_srq_recv: *const std::ffi::c_void,
    pub(crate) create_qp_ex: *const std::ffi::c_void,
    pub(crate) create_cq_ex: *const std::ffi::c_void,
    pub(crate) alloc_mw: *const std::ffi::c_void,
    pub(crate) bind_mw: *const std::ffi::c_void,
    pub(crate) dealloc_mw: *const std::ffi::c_void,
}

static DEVICE: OnceLock<Result<Option<Device>, EnvError>> = OnceLock::new();
static CONTEXTS: Mutex<Option<BTreeMap<usize, OpenContext>>> = Mutex::new(None);

/// An open context: the `verbs_context` the program holds, and the pipe whose read end is
/// its `async_fd`. The NIC's thread writes each asynchronous event of the context's objects
/// as 16 bytes (the element's address, the `ibv_event_type`, 4 bytes of padding), as the
/// kernel's uverbs async event file carries `struct ib_uverbs_async_event_desc`; the write
/// end does not block, so a program that never reads loses events instead of stopping the NIC.
#[derive(Debug)]
struct OpenContext {
    _vctx: CBox<VerbsContext>,
    async_reader: std::io::PipeReader,
    async_writer: std::io::PipeWriter,
}
static AT_EXIT: Once = Once::new();
static ON_SIGNALS: Once = Once::new();

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock was caught at the boundary; the data is still consistent
    // (every update is a single insert or remove).
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The device from the environment, made on first use. `Err`: a variable does not parse (it is
/// printed once on stderr). `Ok(None)`: no `ROCE_VERBS_IP`.
pub(crate) fn device() -> Result<Option<&'static Device>, Errno> {
    let dev = DEVICE.get_or_init(|| {
        crate::log::start();
        let spec = DeviceSpec::from_env(|k| std::env::var(k).ok());
        if let Err(err) = &spec {
            eprintln!("roce-verbs: {err}");
        }
        spec.map(|s| {
            s.map(|spec| {
                let model = DeviceModel::for_host(spec);
                Device {
                    c_device: CBox::new(model.ibv_device()),
                    model,
                    engine: OnceLock::new(),
                }
            })
        })
    });
    match dev {
        Ok(d) => Ok(d.as_ref()),
        Err(_) => Err(Errno(libc::EINVAL)),
    }
}

/// Our device if `addr` is its `struct ibv_device`.
pub(crate) fn device_at(addr: usize) -> Result<&'static Device, Errno> {
    match device()? {
        Some(d) if d.c_device.addr() == addr && addr != 0 => Ok(d),
        _ => Err(Errno(libc::EINVAL)),
    }
}

/// Opens a context on the device at `dev_addr`, starting the NIC the first time.
pub(crate) fn open(dev_addr: usize, fns: ContextFns) -> Result<*mut IbvContext, Errno> {
    let dev = device_at(dev_addr)?;
    let engine = dev.engine.get_or_init(|| {
        let e = Engine::start(&dev.model);
        match &e {
            Ok(engine) => engine.device.on_async_event(crate::verbs::raise),
            Err(msg) => eprintln!("roce-verbs: {msg}"),
        }
        e
    });
    if engine.is_err() {
        return Err(Errno(libc::EADDRNOTAVAIL));
    }
    AT_EXIT.call_once(crate::ffi::register_at_exit);
    if dev.model.spec.stats.is_some() {
        ON_SIGNALS.call_once(crate::ffi::write_stats_on_fatal_signals);
    }
    let query_port = fns.query_port;
    let (async_reader, async_writer) =
        std::io::pipe().map_err(|e| Errno(e.raw_os_error().unwrap_or(libc::EMFILE)))?;
    crate::ffi::set_nonblocking(&async_writer)
        .map_err(|e| Errno(e.raw_os_error().unwrap_or(libc::EIO)))?;
    let null = std::ptr::null();
    let vctx = CBox::new(VerbsContext {
        query_port: Some(query_port),
        _ops1: [null; 24],
        create_cq_ex: fns.create_cq_ex,
        priv_: std::ptr::null_mut(),
        query_device_ex: Some(fns.query_device_ex),
        _ops2: [null; 4],
        open_qp: null,
        create_qp_ex: fns.create_qp_ex,
        _ops3: [null; 4],
        _abi_placeholder3: 0,
        sz: size_of::<VerbsContext>(),
        context: IbvContext {
            device: dev.c_device.ptr(),
            ops: IbvContextOps {
                _compat0: [null; 7],
                alloc_mw: fns.alloc_mw,
                bind_mw: fns.bind_mw,
                dealloc_mw: fns.dealloc_mw,
                _compat1: null,
                poll_cq: fns.poll_cq,
                req_notify_cq: fns.req_notify_cq,
                _compat2: [null; 7],
                post_srq_recv: fns.post_srq_recv,
                _compat3: [null; 4],
                post_send: fns.post_send,
                post_recv: fns.post_recv,
                _compat4: [null; 5],
            },
            cmd_fd: -1,
            async_fd: std::os::fd::AsRawFd::as_raw_fd(&async_reader),
            num_comp_vectors: 1,
            mutex: libc::PTHREAD_MUTEX_INITIALIZER,
            abi_compat: abi::VERBS_ABI_IS_EXTENDED as *mut std::ffi::c_void,
        },
    });
    // The `ibv_context` inside: what the application holds (an address, no reference made).
    let ctx = vctx
        .ptr()
        .wrapping_byte_add(std::mem::offset_of!(VerbsContext, context))
        .cast::<IbvContext>();
    lock(&CONTEXTS).get_or_insert_with(BTreeMap::new).insert(
        ctx as usize,
        OpenContext {
            _vctx: vctx,
            async_reader,
            async_writer,
        },
    );
    Ok(ctx)
}

/// `ibv_get_async_event`: waits on the context's async pipe for the next event, and returns it
/// with the tag it was raised with (`raise_async_event`); `EAGAIN` if the program made the fd
/// non-blocking and none waits.
pub(crate) fn wait_async_event(ctx_addr: usize) -> Result<(abi::IbvAsyncEvent, u32), Errno> {
    let reader = lock(&CONTEXTS)
        .as_ref()
        .and_then(|m| m.get(&ctx_addr))
        .map(|c| c.async_reader.try_clone())
        .ok_or(Errno(libc::EINVAL))?;
    let mut r = reader.map_err(|e| Errno(e.raw_os_error().unwrap_or(libc::EIO)))?;
    let mut record = [0u8; ASYNC_RECORD];
    // Outside the table's lock: this blocks. A closed pipe (the context was closed meanwhile)
    // is EIO.
    std::io::Read::read_exact(&mut r, &mut record)
        .map_err(|e| Errno(e.raw_os_error().unwrap_or(libc::EIO)))?;
    let (element, rest) = record.split_at(8);
    let event = abi::IbvAsyncEvent {
        element: u64::from_ne_bytes(element.try_into().unwrap_or_default()) as usize
            as *mut std::ffi::c_void,
        event_type: c_int::from_ne_bytes(rest[..4].try_into().unwrap_or_default()),
    };
    Ok((
        event,
        u32::from_ne_bytes(rest[4..8].try_into().unwrap_or_default()),
    ))
}

/// Bytes of one event in a context's async pipe.
const ASYNC_RECORD: usize = 16;

/// Writes an event for `element` (a QP's or SRQ's address) to the async pipe of the context at
/// `ctx_addr`, with `tag` (the QP's number) to tell the object from a later one at the same
/// address; lost if the pipe is full or the context closed.
pub(crate) fn raise_async_event(ctx_addr: usize, element: usize, event_type: c_int, tag: u32) {
    let mut record = [0u8; ASYNC_RECORD];
    record[..8].copy_from_slice(&(element as u64).to_ne_bytes());
    record[8..12].copy_from_slice(&event_type.to_ne_bytes());
    record[12..16].copy_from_slice(&tag.to_ne_bytes());
    let contexts = lock(&CONTEXTS);
    if let Some(c) = contexts.as_ref().and_then(|m| m.get(&ctx_addr)) {
        // A pipe write of 16 bytes is atomic: whole, or EAGAIN when full (the event is lost).
        let _ = std::io::Write::write(&mut &c.async_writer, &record);
    }
}

/// The NIC of the open context at `ctx_addr`.
pub(crate) fn engine(ctx_addr: usize) -> Result<&'static Engine, Errno> {
    let dev = context(ctx_addr)?;
    match dev.engine.get() {
        Some(Ok(e)) => Ok(e),
        _ => Err(Errno(libc::EINVAL)),
    }
}

/// The NIC, once a context was opened on the device: `ENODEV` before (or without a device).
pub(crate) fn running_engine() -> Result<&'static Engine, Errno> {
    match device()?.map(|d| d.engine.get()) {
        Some(Some(Ok(e))) => Ok(e),
        _ => Err(Errno(libc::ENODEV)),
    }
}

/// The device of the open context at `ctx_addr`.
pub(crate) fn context(ctx_addr: usize) -> Result<&'static Device, Errno> {
    let known = lock(&CONTEXTS)
        .as_ref()
        .is_some_and(|m| m.contains_key(&ctx_addr));
    if !known {
        return Err(Errno(libc::EINVAL));
    }
    device()?.ok_or(Errno(libc::EINVAL))
}

/// Closes the context at `ctx_addr` and frees it; writes the counters if asked to.
pub(crate) fn close(ctx_addr: usize) -> Result<(), Errno> {
    let removed = lock(&CONTEXTS)
        .as_mut()
        .and_then(|m| m.remove(&ctx_addr))
        .ok_or(Errno(libc::EINVAL))?;
    drop(removed);
    write_stats();
    Ok(())
}

/// Writes the counters to `ROCE_VERBS_STATS`, if set (at every close and at exit): this
/// process's, so a NIC that other processes share writes them to `PATH.PID`, one file per
/// process (`roce exec` adds them up).
pub(crate) fn write_stats() {
    let Ok(Some(dev)) = device() else { return };
    let Some(path) = &dev.model.spec.stats else {
        return;
    };
    let Some(Ok(engine)) = dev.engine.get() else {
        return;
    };
    // Without the NIC's runtime: at exit its thread-locals may be gone already.
    let stats = engine.device.stats_now();
    let json = stats_json(dev, &stats);
    let path = if dev.model.spec.nic.shares() {
        let mut per_process = path.clone().into_os_string();
        per_process.push(format!(".{}", std::process::id()));
        std::path::PathBuf::from(per_process)
    } else {
        path.clone()
    };
    if let Err(err) = std::fs::write(&path, json) {
        eprintln!("roce-verbs: writing counters to {}: {err}", path.display());
    }
}

/// `{"device": .., "ip": .., "mtu": .., "counters": {name: value, ..}}`.
fn stats_json(dev: &Device, stats: &roce_core::Stats) -> String {
    let spec = &dev.model.spec;
    let mut s = String::new();
    // Names are Rust identifiers and the device name has no quote (checked in config), so no
    // escaping is needed beyond what {:?} does for the name.
    let _ = write!(
        s,
        "{{\"device\":{:?},\"ip\":\"{}\",\"mtu\":{},\"pid\":{},\"counters\":{{",
        spec.name,
        spec.nic.ip,
        spec.mtu().bytes(),
        std::process::id()
    );
    for (i, (name, value)) in stats.counters().enumerate() {
        let _ = write!(s, "{}\"{name}\":{value}", if i == 0 { "" } else { "," });
    }
    s.push_str("}}\n");
    s
}
