//! Unit tests of the responder's small types.

use super::Msn;

#[test]
fn the_msn_wraps_at_24_bits() {
    let last = (0..0x00ff_ffff).fold(Msn::default(), |msn, _| msn.next());
    assert_eq!(last.value(), 0x00ff_ffff);
    assert_eq!(last.next().value(), 0);
}
