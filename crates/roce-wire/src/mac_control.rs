//! MAC control frames that stop a link's sender (IEEE 802.3 Annex 31B PAUSE, and IEEE 802.1Qbb
//! priority-based flow control, PFC): what a RoCE switch sends a host whose traffic fills its
//! buffers, and what it obeys from one. Both go to the reserved address 01:80:C2:00:00:01 with
//! EtherType 0x8808 and are never forwarded.
//!
//! Layout after the Ethernet header: a 2-byte opcode (0x0001 PAUSE, 0x0101 PFC); PAUSE then
//! holds one 2-byte time for every priority, PFC a 2-byte class-enable vector (bit `p` for
//! priority `p`) and eight 2-byte times, one per priority. Times are in quanta of 512 bit times;
//! 0 resumes. The frame is padded to Ethernet's 60-byte minimum.

/// The EtherType of MAC control frames.
pub const ETHER_TYPE: u16 = 0x8808;
/// The reserved destination of PAUSE and PFC frames.
pub const DESTINATION: [u8; 6] = [0x01, 0x80, 0xc2, 0x00, 0x00, 0x01];
/// The PAUSE opcode (802.3x).
pub const OPCODE_PAUSE: u16 = 0x0001;
/// The PFC opcode (802.1Qbb).
pub const OPCODE_PFC: u16 = 0x0101;
/// The priorities PFC names.
pub const PRIORITIES: usize = 8;
/// The length of a PFC frame (Ethernet's minimum, without the FCS).
pub const FRAME_LEN: usize = 60;

/// Whether the Ethernet frame `frame` is a MAC control frame to the reserved address (a PAUSE
/// or PFC request for the receiver of the link, whatever its opcode).
pub fn is_mac_control(frame: &[u8]) -> bool {
    frame.get(0..6) == Some(&DESTINATION[..])
        && frame.get(12..14) == Some(&ETHER_TYPE.to_be_bytes()[..])
}

/// What a MAC control frame asks, as (priority, quanta) for each priority it pauses or resumes:
/// PFC names them in its class-enable vector, PAUSE pauses all eight. An unknown opcode, or a
/// frame cut before a time it enables, asks nothing (never a panic: the frame came from the
/// link).
pub fn pauses(frame: &[u8]) -> Vec<(u8, u16)> {
    let word = |at: usize| {
        frame
            .get(at..at + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
    };
    match word(14) {
        Some(OPCODE_PFC) => {
            let Some(enabled) = word(16) else {
                return Vec::new();
            };
            (0..PRIORITIES as u8)
                .filter(|&p| enabled & (1 << p) != 0)
                .filter_map(|p| Some((p, word(18 + 2 * usize::from(p))?)))
                .collect()
        }
        Some(OPCODE_PAUSE) => match word(16) {
            Some(quanta) => (0..PRIORITIES as u8).map(|p| (p, quanta)).collect(),
            None => Vec::new(),
        },
        _ => Vec::new(),
    }
}

/// A PFC frame from `src` that pauses `priority` (taken modulo 8) for `quanta` (0 resumes it),
/// the other priorities left alone.
pub fn pfc_frame(src: [u8; 6], priority: u8, quanta: u16) -> [u8; FRAME_LEN] {
    let mut frame = [0u8; FRAME_LEN];
    frame[0..6].copy_from_slice(&DESTINATION);
    frame[6..12].copy_from_slice(&src);
    frame[12..14].copy_from_slice(&ETHER_TYPE.to_be_bytes());
    frame[14..16].copy_from_slice(&OPCODE_PFC.to_be_bytes());
    let priority = usize::from(priority) % PRIORITIES;
    frame[16..18].copy_from_slice(&(1u16 << priority).to_be_bytes());
    let at = 18 + 2 * priority;
    frame[at..at + 2].copy_from_slice(&quanta.to_be_bytes());
    frame
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pfc_frame_is_laid_out_as_802_1qbb_says() {
        let frame = pfc_frame([2, 0, 0, 0, 0, 1], 3, 0xffff);
        assert!(is_mac_control(&frame));
        assert_eq!(&frame[0..6], &DESTINATION);
        assert_eq!(&frame[12..16], &[0x88, 0x08, 0x01, 0x01]);
        assert_eq!(&frame[16..18], &[0x00, 0x08]); // class-enable vector: priority 3
        assert_eq!(&frame[18 + 6..18 + 8], &[0xff, 0xff]); // time of priority 3
        assert!(frame[18..24].iter().all(|&b| b == 0));
        assert!(frame[26..].iter().all(|&b| b == 0));
    }

    #[test]
    fn pauses_are_read_from_pfc_and_802_3x_frames_and_cut_frames_ask_nothing() {
        let pfc = pfc_frame([2, 0, 0, 0, 0, 1], 3, 1000);
        assert_eq!(pauses(&pfc), [(3, 1000)]);
        let xon = pfc_frame([2, 0, 0, 0, 0, 1], 5, 0);
        assert_eq!(pauses(&xon), [(5, 0)]);
        let mut pause = pfc;
        pause[14..18].copy_from_slice(&[0x00, 0x01, 0x12, 0x34]);
        assert_eq!(pauses(&pause).len(), PRIORITIES);
        assert!(pauses(&pause).iter().all(|&(_, q)| q == 0x1234));
        assert!(pauses(&pfc[..17]).is_empty(), "truncated");
        assert_eq!(pauses(&pfc[..20]), [], "priority 3's time is cut off");
        let mut other = pfc;
        other[14..16].copy_from_slice(&[0x00, 0x02]);
        assert!(pauses(&other).is_empty(), "another opcode");
        for len in 0..FRAME_LEN {
            let _ = pauses(&pfc[..len]);
            let _ = is_mac_control(&pfc[..len]);
        }
        let mut to_other = pfc;
        to_other[5] = 2;
        assert!(!is_mac_control(&to_other));
    }
}
