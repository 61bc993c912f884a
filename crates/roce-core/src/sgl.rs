//! A work request's scatter/gather list.
//!
//! Nearly every WR has one SGE (perftest's, rdma-core's examples', UCX's and MPI's data
//! paths), and a `Vec` of one cost an allocation when the WR was built and a free when it
//! retired: about 340 of the 4 500 instructions a 64-byte WRITE costs its sender
//! (`roce perf write -s 64`, callgrind). [`Sgl`] keeps a single SGE in place and only a longer
//! list in a vector; it reads as a `[Sge]`.

use std::ops::Deref;

use crate::wr::Sge;

/// The SGEs of a work request, read as `&[Sge]`: none or one without an allocation, more in a
/// vector. Built from a `Vec<Sge>`, an array, one [`Sge`] or an iterator.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Sgl(Entries);

#[derive(Debug, Clone, PartialEq, Eq, Default)]
enum Entries {
    #[default]
    None,
    One(Sge),
    Many(Vec<Sge>),
}

impl Deref for Sgl {
    type Target = [Sge];

    fn deref(&self) -> &[Sge] {
        match &self.0 {
            Entries::None => &[],
            Entries::One(sge) => std::slice::from_ref(sge),
            Entries::Many(sges) => sges,
        }
    }
}

impl From<Sge> for Sgl {
    fn from(sge: Sge) -> Self {
        Self(Entries::One(sge))
    }
}

impl From<Vec<Sge>> for Sgl {
    fn from(sges: Vec<Sge>) -> Self {
        match sges[..] {
            [] => Self(Entries::None),
            [sge] => Self(Entries::One(sge)),
            _ => Self(Entries::Many(sges)),
        }
    }
}

impl<const N: usize> From<[Sge; N]> for Sgl {
    fn from(sges: [Sge; N]) -> Self {
        match sges[..] {
            [] => Self(Entries::None),
            [sge] => Self(Entries::One(sge)),
            _ => Self(Entries::Many(sges.to_vec())),
        }
    }
}

impl FromIterator<Sge> for Sgl {
    fn from_iter<I: IntoIterator<Item = Sge>>(iter: I) -> Self {
        let mut iter = iter.into_iter();
        let Some(first) = iter.next() else {
            return Self(Entries::None);
        };
        let Some(second) = iter.next() else {
            return Self(Entries::One(first));
        };
        let mut sges = vec![first, second];
        sges.extend(iter);
        Self(Entries::Many(sges))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sge(i: u32) -> Sge {
        Sge {
            addr: u64::from(i) * 4096,
            length: 100 + i,
            lkey: i,
        }
    }

    #[test]
    fn every_way_in_reads_back_the_same_entries_in_order() {
        for n in 0..5u32 {
            let sges: Vec<Sge> = (0..n).map(sge).collect();
            let from_vec = Sgl::from(sges.clone());
            let collected: Sgl = sges.iter().copied().collect();
            assert_eq!(&from_vec[..], &sges[..], "{n}");
            assert_eq!(&collected[..], &sges[..], "{n}");
            assert_eq!(from_vec, collected, "{n}: one representation per list");
        }
        assert_eq!(&Sgl::from(sge(7))[..], &[sge(7)]);
        assert_eq!(&Sgl::from([sge(1), sge(2)])[..], &[sge(1), sge(2)]);
        assert!(Sgl::default().is_empty());
    }
}
