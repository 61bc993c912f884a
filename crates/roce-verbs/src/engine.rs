//! The NIC inside the program: roce-device's `Device` on a tokio runtime of its own thread,
//! started by the first `ibv_open_device`. The program's threads call its verbs directly
//! ([`roce_device::DeviceHandle::verb`]); the thread only moves packets, timers and
//! completions.

use roce_device::DeviceHandle;

use crate::device::DeviceModel;

/// A running NIC.
#[derive(Debug)]
pub(crate) struct Engine {
    /// Its verbs.
    pub(crate) device: DeviceHandle,
}

impl Engine {
    /// Starts the NIC of `model` ([`roce_device::DeviceSpec::open`]) on a thread named
    /// `roce-verbs-nic`; fails (with a message for stderr) if the backend cannot open, e.g. when
    /// the address is not one of this host's. An IPv4 NIC that cannot bind GID 0's link-local
    /// address starts without it, and `model` records why
    /// ([`DeviceModel::link_local_unbound`]).
    pub(crate) fn start(model: &DeviceModel) -> Result<Self, String> {
        let mut spec = model.spec.nic.clone();
        spec.mtu = Some(model.spec.mtu());
        spec.link_local = model.iface.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        roce_cabi::spawn_settled("roce-verbs-nic", move || {
            let runtime = match spec.runtime() {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = tx.send(Err(format!("cannot start the NIC's runtime: {e}")));
                    return;
                }
            };
            runtime.block_on(async move {
                let opened = spec.open().map_err(|e| e.with_advice("roce exec --ip"));
                let ok = opened.is_ok();
                let _ = tx.send(opened);
                if ok {
                    // The device runs as long as the process: its task lives on this runtime.
                    std::future::pending::<()>().await;
                }
            });
        })
        .map_err(|e| format!("cannot start the NIC's thread: {e}"))?;
        let opened = rx
            .recv()
            .map_err(|_| "the NIC's thread stopped".to_owned())??;
        if let Some(why) = &opened.not_shared {
            eprintln!("roce-verbs: {why}");
        }
        // On the program's thread, before `ibv_open_device` returns: a program that exits at
        // once still says it (the NIC's task says "device started" when it first runs).
        tracing::info!(
            device = %model.spec.name,
            ip = %model.spec.nic.ip,
            backend = ?model.spec.nic.backend,
            shared = model.spec.nic.agent.is_some() && opened.not_shared.is_none(),
            "NIC opened"
        );
        if let Some(why) = opened.link_local_unbound {
            model.link_local_unbound(why);
        }
        Ok(Self {
            device: opened.device,
        })
    }
}
