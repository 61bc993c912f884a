use super::*;

#[test]
fn messages_read_back_as_written() {
    for message in [
        Message::Join,
        Message::Services,
        Message::Listen(vec![]),
        Message::Listen(vec![0x0106_0000_4791, 1]),
        Message::Listening,
        Message::Slot(0, None),
        Message::Slot(255, Some(98)),
        Message::Refused(98),
    ] {
        assert_eq!(Message::decode(&message.encode()), Some(message));
    }
    assert_eq!(Message::decode(b"slot 256"), None);
    assert_eq!(Message::decode(b"listen zz"), None);
    assert_eq!(Message::decode(b"\xff"), None);
}
