//! What every CM message of [`super`] shares, as the macro `cm_message!` that each message file
//! invokes with its own fields: the view (a 232-byte [`header_view`](crate::bytes::header_view)),
//! the Local (and, but for REQ, Remote) Communication ID and private-data accessors, the
//! `PRIVATE_DATA_LEN` constant, and a `Repr` whose fields are the comm IDs, the message's own
//! fields and the private data, with `buffer_len` and the `emit` shell.
//!
//! The message file keeps its `field` module (where each field is), the accessors of its own
//! fields (each `Repr` field is read by the accessor of its name, or by the one named after
//! `=`), `parse` (check the length, then `Self::read`) and, if it has fields of its own,
//! the private `emit_fields` that writes them.

/// `cm_message! { name: "RTU", a: "an", remote: remote_comm_id, fields: { … }, emit_with:
/// emit_fields, emit_doc: "…" }`; `remote` and `fields`/`emit_with` are left out where the
/// message has no Remote Communication ID or no fields of its own.
macro_rules! cm_message {
    (
        name: $name:literal,
        a: $a:literal,
        $(remote: $remote:ident,)?
        $(fields: {
            $( $(#[$m:meta])* $f:ident : $t:ty $(= $read:ident)? ),* $(,)?
        },)?
        $(emit_with: $emit:ident,)?
        emit_doc: $emit_doc:literal $(,)?
    ) => {
        #[doc = concat!("Bytes of private data ", $a, " ", $name, " carries.")]
        pub const PRIVATE_DATA_LEN: usize = field::PRIVATE_DATA.end - field::PRIVATE_DATA.start;

        $crate::bytes::header_view!(
            concat!("A view of a CM ", $name, " message: the 232 bytes after the MAD header."),
            $crate::Layer::Cm($name),
            $crate::mad::DATA_LEN
        );

        impl<T: AsRef<[u8]>> Packet<T> {
            /// Local Communication ID: the sender's.
            pub fn local_comm_id(&self) -> u32 {
                $crate::bytes::get_u32(self.buffer.as_ref(), field::LOCAL_COMM_ID)
            }

            $(
                /// Remote Communication ID: the receiver's.
                pub fn $remote(&self) -> u32 {
                    $crate::bytes::get_u32(self.buffer.as_ref(), field::REMOTE_COMM_ID)
                }
            )?

            /// The private data.
            pub fn private_data(&self) -> &[u8] {
                &self.buffer.as_ref()[field::PRIVATE_DATA]
            }
        }

        #[doc = concat!("The fields of ", $a, " ", $name, ".")]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub struct Repr {
            /// Local Communication ID.
            pub local_comm_id: u32,
            $(
                /// Remote Communication ID.
                pub $remote: u32,
            )?
            $($( $(#[$m])* pub $f: $t, )*)?
            /// Private data.
            pub private_data: [u8; PRIVATE_DATA_LEN],
        }

        impl Repr {
            /// Every field, from a packet whose length was checked.
            fn read<T: AsRef<[u8]>>(packet: &Packet<T>) -> Self {
                Self {
                    local_comm_id: packet.local_comm_id(),
                    $( $remote: packet.$remote(), )?
                    $($( $f: $crate::mad::message::cm_message!(@read packet, $f $(, $read)?), )*)?
                    private_data: $crate::mad::array(
                        packet.buffer.as_ref(),
                        field::PRIVATE_DATA.start,
                    ),
                }
            }

            /// Length of the emitted message.
            pub const fn buffer_len(&self) -> usize {
                $crate::mad::DATA_LEN
            }

            #[doc = $emit_doc]
            pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
                let buf = packet.buffer.as_mut();
                // First: REQ's clears the whole message.
                $( self.$emit(buf); )?
                $crate::bytes::set_u32(buf, field::LOCAL_COMM_ID, self.local_comm_id);
                $( $crate::bytes::set_u32(buf, field::REMOTE_COMM_ID, self.$remote); )?
                buf[field::PRIVATE_DATA].copy_from_slice(&self.private_data);
            }
        }
    };
    (@read $packet:ident, $f:ident) => {
        $packet.$f()
    };
    (@read $packet:ident, $f:ident, $read:ident) => {
        $packet.$read()
    };
}
pub(crate) use cm_message;
