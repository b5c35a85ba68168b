//! Ids no one can guess, for what a face hands its clients (questions, parked calls, tickets, tasks).

/// 128 bits from the operating system's random source, in decimal.
pub fn unguessable() -> String {
    let mut bytes = [0u8; 16];
    // The OS source fails only where nothing can run (no /dev/urandom, no getrandom(2)).
    getrandom::fill(&mut bytes).expect("the operating system's random source");
    u128::from_be_bytes(bytes).to_string()
}
