//! The alert communicator: other ranks' requests for this rank's call history, and this
//! rank's requests for theirs, answered by the progress thread.

use super::*;

/// The progress thread's side of the alert communicator: answers other ranks' requests
/// for this rank's call history, and asks for another's.
pub(super) struct Asks {
    alert: RawComm,
    request: ffi::MPI_Request,
    word: Box<[u8; 8]>,
}

impl Asks {
    pub(super) fn new(alert: RawComm) -> Asks {
        let mut asks = Asks {
            alert,
            // SAFETY: a null request handle, replaced by `listen`.
            request: unsafe { ffi::RSMPI_REQUEST_NULL },
            word: Box::new([0; 8]),
        };
        asks.listen();
        asks
    }

    fn listen(&mut self) {
        // SAFETY: `word` lives as long as the request (in `self`, boxed).
        unsafe {
            ffi::MPI_Irecv(
                self.word.as_mut_ptr() as *mut std::ffi::c_void,
                8,
                ffi::RSMPI_UINT8_T,
                ffi::RSMPI_ANY_SOURCE,
                TAG_ASK,
                self.alert.0,
                &mut self.request,
            )
        };
    }

    /// Withdraws the standing receive (before MPI is finalised).
    pub(super) fn close(&mut self) {
        // SAFETY: the live request posted by `listen`: cancelled, then completed.
        unsafe {
            ffi::MPI_Cancel(&mut self.request);
            ffi::MPI_Wait(&mut self.request, ffi::RSMPI_STATUS_IGNORE);
        }
    }

    /// Answers a request that arrived, if any.
    pub(super) fn serve(&mut self) {
        let mut flag: c_int = 0;
        // SAFETY: an all-zero MPI_Status is a valid value to be overwritten.
        let mut status: ffi::MPI_Status = unsafe { std::mem::zeroed() };
        // SAFETY: the live request posted by `listen`.
        unsafe { ffi::MPI_Test(&mut self.request, &mut flag, &mut status) };
        if flag == 0 {
            return;
        }
        let answer = crate::cluster::wire::encode(&crate::cluster::wire::RecentHistory(
            crate::cluster::history::recent(),
        ));
        // SAFETY: `answer` outlives the blocking send; the asker waits for it.
        unsafe {
            ffi::MPI_Send(
                answer.as_ptr() as *const std::ffi::c_void,
                answer.len() as c_int,
                ffi::RSMPI_UINT8_T,
                status.MPI_SOURCE,
                TAG_ANSWER,
                self.alert.0,
            )
        };
        self.listen();
    }

    /// `peer`'s kept call history, if it answers within a few seconds.
    pub(super) fn history_of(
        &mut self,
        peer: u32,
    ) -> Option<Vec<crate::cluster::wire::HistoryEntry>> {
        let ask = [0u8; 8];
        // SAFETY: a small message from a live buffer.
        unsafe {
            ffi::MPI_Send(
                ask.as_ptr() as *const std::ffi::c_void,
                8,
                ffi::RSMPI_UINT8_T,
                peer as c_int,
                TAG_ASK,
                self.alert.0,
            )
        };
        let give_up = Instant::now() + Duration::from_secs(3);
        // SAFETY: as in `serve`.
        let mut status: ffi::MPI_Status = unsafe { std::mem::zeroed() };
        loop {
            // The peer may be asking this rank at the same time.
            self.serve();
            let mut flag: c_int = 0;
            // SAFETY: out-pointers to locals.
            unsafe {
                ffi::MPI_Iprobe(
                    peer as c_int,
                    TAG_ANSWER,
                    self.alert.0,
                    &mut flag,
                    &mut status,
                )
            };
            if flag != 0 {
                break;
            }
            if Instant::now() > give_up {
                return None;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let mut count: c_int = 0;
        // SAFETY: the status of the probed message.
        unsafe { ffi::MPI_Get_count(&status, ffi::RSMPI_UINT8_T, &mut count) };
        let mut bytes = vec![0u8; count.max(0) as usize];
        // SAFETY: a buffer of the probed message's size.
        unsafe {
            ffi::MPI_Recv(
                bytes.as_mut_ptr() as *mut std::ffi::c_void,
                count,
                ffi::RSMPI_UINT8_T,
                peer as c_int,
                TAG_ANSWER,
                self.alert.0,
                ffi::RSMPI_STATUS_IGNORE,
            )
        };
        crate::cluster::wire::decode::<crate::cluster::wire::RecentHistory>(&bytes, peer)
            .ok()
            .map(|h| h.0)
    }
}
