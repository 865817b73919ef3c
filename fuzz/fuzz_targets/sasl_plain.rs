//! `sasl::plain::parse`, the broker's reading of a SASL/PLAIN message, on arbitrary bytes.
//!
//! Checked: no panic; what is accepted has a non-empty username and password, no NUL in any
//! field, an authzid empty or equal to the username, and encodes back to the input.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(message) = sasl::plain::parse(data) else {
        return;
    };
    assert!(!message.username.is_empty() && !message.password.is_empty());
    assert!(message.authzid.is_empty() || message.authzid == message.username);
    for field in [&message.authzid, &message.username, &message.password] {
        assert!(!field.contains('\0'));
    }
    let mut again = message.authzid.as_bytes().to_vec();
    again.extend_from_slice(&sasl::plain::encode(&message.username, &message.password));
    assert_eq!(again, data);
});
