use std::sync::OnceLock;

use super::grammar::{check_nonce, decode_saslname, encode_saslname};
use super::*;

// RFC 7677 section 3.
const RFC_CLIENT_NONCE: &str = "rOprNGfwEbeRWgbNEkqO";
const RFC_SERVER_NONCE: &str = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
const RFC_SALT: &str = "W22ZaJ0SNY7soEsUEjb6gQ==";
const RFC_CLIENT_FIRST: &str = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
const RFC_SERVER_FIRST: &str =
    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
const RFC_CLIENT_FINAL: &str = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
                                p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
const RFC_SERVER_FINAL: &str = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

fn rfc_credential() -> Credential {
    static CREDENTIAL: OnceLock<Credential> = OnceLock::new();
    CREDENTIAL
        .get_or_init(|| {
            let salt = BASE64.decode(RFC_SALT).unwrap();
            Credential::from_password(Hash::Sha256, "pencil", salt, 4096)
        })
        .clone()
}

fn rfc_lookup(user: &str) -> Option<Credential> {
    (user == "user").then(rfc_credential)
}

/// A server exchange started on `client_first` against the RFC's credential, its nonce fixed.
fn rfc_server(client_first: &str) -> Result<(ServerExchange, String), ScramError> {
    let (exchange, first) =
        ServerExchange::start_with(Hash::Sha256, client_first.as_bytes(), rfc_lookup, || {
            Ok(RFC_SERVER_NONCE.to_owned())
        })?;
    Ok((exchange, String::from_utf8(first).unwrap()))
}

fn rfc_server_finish(client_final: &str) -> Result<(String, Vec<u8>), ScramError> {
    let (exchange, _) = rfc_server(RFC_CLIENT_FIRST).unwrap();
    exchange.finish(client_final.as_bytes())
}

/// A full exchange between a client with `password` and a server storing `stored` for "user".
fn exchange(
    hash: Hash,
    user: &str,
    password: &str,
    stored: &Credential,
) -> Result<String, ScramError> {
    let (mut client, client_first) = ClientExchange::new(hash, user, password);
    let (server, server_first) =
        ServerExchange::start(hash, &client_first, |_| Some(stored.clone()))?;
    let client_final = client.respond(&server_first)?;
    let (name, server_final) = server.finish(&client_final)?;
    client.verify(&server_final)?;
    Ok(name)
}

#[test]
fn rfc_7677_client_side() {
    let (mut client, first) =
        ClientExchange::with_nonce(Hash::Sha256, "user", "pencil", RFC_CLIENT_NONCE.to_owned());
    assert_eq!(first, RFC_CLIENT_FIRST.as_bytes());
    let last = client.respond(RFC_SERVER_FIRST.as_bytes()).unwrap();
    assert_eq!(String::from_utf8(last).unwrap(), RFC_CLIENT_FINAL);
    client.verify(RFC_SERVER_FINAL.as_bytes()).unwrap();
}

#[test]
fn rfc_7677_server_side() {
    let (server, first) = rfc_server(RFC_CLIENT_FIRST).unwrap();
    assert_eq!(first, RFC_SERVER_FIRST);
    let (user, last) = server.finish(RFC_CLIENT_FINAL.as_bytes()).unwrap();
    assert_eq!(user, "user");
    assert_eq!(String::from_utf8(last).unwrap(), RFC_SERVER_FINAL);
}

#[test]
fn credential_forms_agree() {
    let salt = BASE64.decode(RFC_SALT).unwrap();
    let salted = Credential::salted_password(Hash::Sha256, "pencil", &salt, 4096);
    assert_eq!(salted.len(), 32);
    assert_eq!(
        Credential::from_salted_password(Hash::Sha256, &salted, salt, 4096),
        rfc_credential()
    );
    let generated = Credential::generate(Hash::Sha512, "pencil", 4096);
    assert_eq!(generated.salt.len(), 32);
    assert_eq!(
        (generated.stored_key.len(), generated.server_key.len()),
        (64, 64)
    );
    assert_eq!(
        Credential::from_password(Hash::Sha512, "pencil", generated.salt.clone(), 4096),
        generated
    );
    assert_ne!(
        Credential::generate(Hash::Sha512, "pencil", 4096).salt,
        generated.salt
    );
    // Kafka's Hi() runs one round for 0 iterations.
    assert_eq!(
        Credential::salted_password(Hash::Sha256, "p", b"s", 0),
        Credential::salted_password(Hash::Sha256, "p", b"s", 1)
    );
}

#[test]
fn credential_debug_redacts_keys() {
    let credential = rfc_credential();
    let shown = format!("{credential:?}");
    assert!(shown.contains("<redacted>"), "{shown}");
    for key in [&credential.stored_key, &credential.server_key] {
        assert!(!shown.contains(&BASE64.encode(key)), "{shown}");
        assert!(!shown.contains(&format!("{key:?}")), "{shown}");
    }
    let (client, _) = ClientExchange::new(Hash::Sha256, "user", "hunter2");
    assert!(!format!("{client:?}").contains("hunter2"));
    let (server, _) = rfc_server(RFC_CLIENT_FIRST).unwrap();
    assert!(!format!("{server:?}").contains(&format!("{:?}", credential.stored_key)));
}

#[test]
fn hash_codes_and_names() {
    for hash in [Hash::Sha256, Hash::Sha512] {
        assert_eq!(Hash::from_code(hash.code()), Some(hash));
    }
    assert_eq!((Hash::Sha256.code(), Hash::Sha512.code()), (1, 2));
    assert_eq!(Hash::from_code(0), None);
    assert_eq!(Hash::from_code(3), None);
    assert_eq!(Hash::Sha512.mechanism_name(), "SCRAM-SHA-512");
    assert_eq!(
        (Hash::Sha256.output_len(), Hash::Sha512.output_len()),
        (32, 64)
    );
}

#[test]
fn round_trips_both_hashes() {
    for hash in [Hash::Sha256, Hash::Sha512] {
        let stored = Credential::generate(hash, "p\u{e4}ss word", MIN_ITERATIONS);
        assert_eq!(
            exchange(hash, "alice", "p\u{e4}ss word", &stored).unwrap(),
            "alice"
        );
    }
}

#[test]
fn wrong_password_is_bad_proof() {
    let stored = Credential::generate(Hash::Sha512, "right", MIN_ITERATIONS);
    assert_eq!(
        exchange(Hash::Sha512, "alice", "wrong", &stored),
        Err(ScramError::BadProof)
    );
    let (mut client, _) =
        ClientExchange::with_nonce(Hash::Sha256, "user", "pencils", RFC_CLIENT_NONCE.to_owned());
    let last = client.respond(RFC_SERVER_FIRST.as_bytes()).unwrap();
    let (server, _) = rfc_server(RFC_CLIENT_FIRST).unwrap();
    assert_eq!(server.finish(&last).unwrap_err(), ScramError::BadProof);
}

#[test]
fn a_tampered_proof_is_bad_proof() {
    let tampered = RFC_CLIENT_FINAL.replace("p=dHzb", "p=dHzc");
    assert_eq!(
        rfc_server_finish(&tampered).unwrap_err(),
        ScramError::BadProof
    );
}

#[test]
fn unknown_user_reads_as_bad_password() {
    let error = rfc_server("n,,n=nobody,r=abc").unwrap_err();
    assert_eq!(error, ScramError::UnknownUser);
    assert_eq!(error.to_string(), ScramError::BadProof.to_string());
}

#[test]
fn credential_of_another_hash_is_refused() {
    let stored = Credential::generate(Hash::Sha512, "pencil", MIN_ITERATIONS);
    assert!(matches!(
        exchange(Hash::Sha256, "user", "pencil", &stored),
        Err(ScramError::BadCredential(_))
    ));
    let mut short = rfc_credential();
    short.stored_key.pop();
    let result = ServerExchange::start(Hash::Sha256, RFC_CLIENT_FIRST.as_bytes(), |_| Some(short));
    assert!(matches!(result, Err(ScramError::BadCredential(_))));
}

#[test]
fn replayed_client_final_is_refused() {
    let stored = Credential::generate(Hash::Sha256, "pencil", MIN_ITERATIONS);
    let (mut client, client_first) = ClientExchange::new(Hash::Sha256, "user", "pencil");
    let (first, server_first) =
        ServerExchange::start(Hash::Sha256, &client_first, |_| Some(stored.clone())).unwrap();
    let client_final = client.respond(&server_first).unwrap();
    first.finish(&client_final).unwrap();
    let (second, _) =
        ServerExchange::start(Hash::Sha256, &client_first, |_| Some(stored.clone())).unwrap();
    assert_eq!(
        second.finish(&client_final).unwrap_err(),
        ScramError::NonceMismatch
    );
}

#[test]
fn server_nonces_extend_the_client_nonce_randomly() {
    let start = || {
        let (_, first) =
            ServerExchange::start(Hash::Sha256, RFC_CLIENT_FIRST.as_bytes(), rfc_lookup).unwrap();
        let first = String::from_utf8(first).unwrap();
        let nonce = first
            .split(',')
            .next()
            .unwrap()
            .strip_prefix("r=")
            .unwrap()
            .to_owned();
        assert!(nonce.starts_with(RFC_CLIENT_NONCE));
        assert!(nonce.len() >= RFC_CLIENT_NONCE.len() + 24, "{nonce}");
        check_nonce(&nonce).unwrap();
        nonce
    };
    assert_ne!(start(), start());
}

#[test]
fn saslname_escaping_round_trips() {
    for name in ["user", "a,b", "a=b", "=2C", ",=,=", "j\u{f6}rg", "=3D=2C"] {
        assert_eq!(decode_saslname(&encode_saslname(name)).unwrap(), name);
    }
    assert_eq!(encode_saslname("a=b,c"), "a=3Db=2Cc");
    assert_eq!(decode_saslname("a=3Db=2Cc").unwrap(), "a=b,c");
    for bad in ["", "a=", "a=2c", "a=3d", "a=41", "a=2", "a\0b"] {
        assert!(decode_saslname(bad).is_err(), "{bad:?}");
    }
    // Through both sides: the lookup and the result see the decoded name.
    let stored = Credential::generate(Hash::Sha256, "pw", MIN_ITERATIONS);
    let (mut client, client_first) = ClientExchange::new(Hash::Sha256, "a,b=c", "pw");
    assert!(client_first.starts_with(b"n,,n=a=2Cb=3Dc,r="));
    let (server, server_first) = ServerExchange::start(Hash::Sha256, &client_first, |user| {
        (user == "a,b=c").then(|| stored.clone())
    })
    .unwrap();
    let (user, server_final) = server
        .finish(&client.respond(&server_first).unwrap())
        .unwrap();
    assert_eq!(user, "a,b=c");
    client.verify(&server_final).unwrap();
}

#[test]
fn gs2_header_variants() {
    // y: the client supports channel binding but thinks the server does not; its c= is "y,,".
    let (server, _) = rfc_server("y,,n=user,r=abc").unwrap();
    let wrong = format!(
        "c=biws,r=abc{RFC_SERVER_NONCE},p={}",
        BASE64.encode([0; 32])
    );
    assert_eq!(
        server.finish(wrong.as_bytes()).unwrap_err(),
        ScramError::ChannelBinding
    );
    let (server, _) = rfc_server("y,,n=user,r=abc").unwrap();
    let right = format!(
        "c=eSws,r=abc{RFC_SERVER_NONCE},p={}",
        BASE64.encode([0; 32])
    );
    assert_eq!(
        server.finish(right.as_bytes()).unwrap_err(),
        ScramError::BadProof
    );

    // An authzid equal to the username is accepted, and is part of c=.
    let (server, _) = rfc_server("n,a=user,n=user,r=abc").unwrap();
    let binding = BASE64.encode("n,a=user,");
    let last = format!(
        "c={binding},r=abc{RFC_SERVER_NONCE},p={}",
        BASE64.encode([0; 32])
    );
    assert_eq!(
        server.finish(last.as_bytes()).unwrap_err(),
        ScramError::BadProof
    );
    assert_eq!(
        rfc_server("n,a=admin,n=user,r=abc").unwrap_err(),
        ScramError::AuthzidMismatch
    );
    assert_eq!(
        rfc_server("n,a=a=2Cb,n=a=2Cb,r=abc").unwrap_err(),
        ScramError::UnknownUser
    );
}

#[test]
fn client_first_extensions() {
    rfc_server("n,,n=user,r=abc,x=1").unwrap();
    rfc_server("n,,n=user,r=abc,tokenauth=false,ext=a=b").unwrap();
    for token in ["tokenauth=true", "tokenauth=TRUE"] {
        assert!(matches!(
            rfc_server(&format!("n,,n=user,r=abc,{token}")),
            Err(ScramError::Unsupported(_))
        ));
    }
    assert!(matches!(
        rfc_server("n,,m=ext,n=user,r=abc"),
        Err(ScramError::Unsupported(_))
    ));
}

#[test]
fn malformed_client_first() {
    let cases: &[&[u8]] = &[
        b"",
        b"n",
        b"n,",
        b"n,,",
        b"n,,n=user",
        b"n,,n=user,",
        b"n,,n=user,r=",
        b"n,,r=abc,n=user",
        b"n,,n=,r=abc",
        b"n,,n=us=er,r=abc",
        b"n,,user,r=abc",
        b"n,,n=user,r=a\x7fb",
        b"n,,n=user,r=a b",
        b"n,,n=user,r=abc,",
        b"n,,n=user,r=abc,=x",
        b"n,,n=user,r=abc,1=x",
        b"n,,n=user,r=abc,x=",
        b"n,,n=user,r=abc,x",
        b"n,x,n=user,r=abc",
        b"n,a=,n=user,r=abc",
        b"x,,n=user,r=abc",
        b",,n=user,r=abc",
        b"nn,,n=user,r=abc",
        b"n,,n=u\0ser,r=abc",
        b"n,,N=user,r=abc",
        b" n,,n=user,r=abc",
    ];
    for &case in cases {
        let result = ServerExchange::start(Hash::Sha256, case, rfc_lookup);
        assert!(
            matches!(result, Err(ScramError::Malformed(_))),
            "{:?}: {result:?}",
            String::from_utf8_lossy(case)
        );
    }
    assert_eq!(
        ServerExchange::start(Hash::Sha256, b"n,,n=us\xffer,r=abc", rfc_lookup).unwrap_err(),
        ScramError::NotUtf8
    );
    assert_eq!(
        rfc_server("p=tls-unique,,n=user,r=abc").unwrap_err(),
        ScramError::Unsupported("channel binding")
    );
}

#[test]
fn malformed_client_final() {
    let nonce = format!("{RFC_CLIENT_NONCE}{RFC_SERVER_NONCE}");
    let proof = "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
    let cases = [
        String::new(),
        "c=biws".to_owned(),
        format!("c=biws,r={nonce}"),
        format!("c=biws,r={nonce},p="),
        format!("r={nonce},c=biws,p={proof}"),
        format!("c=biws,p={proof},r={nonce}"),
        format!("c=biws,r={nonce},p={proof},x=1"),
        format!("c=biws,p={proof}"),
        format!("c=,r={nonce},p={proof}"),
        format!("c=biws,r=,p={proof}"),
        format!("c=biw,r={nonce},p={proof}"),
        format!("c=biws,r={nonce},p={}", &proof[1..]),
        format!("c=biws,r={nonce},p={}", proof.trim_end_matches('=')),
        format!("c=biws,r={nonce},p= {proof}"),
        format!("c=biws,r={nonce},p={}", BASE64.encode([0; 31])),
        format!("c=biws,r={nonce},p={}", BASE64.encode([0; 64])),
        format!("c=biws,r={nonce},x,p={proof}"),
        format!("c=biws,r={nonce},,p={proof}"),
        format!(",c=biws,r={nonce},p={proof}"),
    ];
    for case in &cases {
        let result = rfc_server_finish(case);
        assert!(
            matches!(result, Err(ScramError::Malformed(_))),
            "{case:?}: {result:?}"
        );
    }
    assert_eq!(
        rfc_server_finish(&RFC_CLIENT_FINAL.replace("c=biws", "c=eSws")).unwrap_err(),
        ScramError::ChannelBinding
    );
    assert_eq!(
        rfc_server_finish(&RFC_CLIENT_FINAL.replace("$k0,", "$k1,")).unwrap_err(),
        ScramError::NonceMismatch
    );
    assert_eq!(
        rfc_server_finish(&RFC_CLIENT_FINAL.replace("$k0,", ",")).unwrap_err(),
        ScramError::NonceMismatch
    );
    // A nonce that ends with the exchange's passes the nonce check (Kafka's rule, for
    // librdkafka < 2.1); the proof, made over the message without the prefix, then fails.
    assert_eq!(
        rfc_server_finish(&RFC_CLIENT_FINAL.replace(",r=", ",r=prefix")).unwrap_err(),
        ScramError::BadProof
    );
    assert_eq!(
        rfc_server_finish(&RFC_CLIENT_FINAL.replace("c=biws", "c=\u{e9}")).unwrap_err(),
        ScramError::Malformed("client-final-message: c= is not base64")
    );
    let (server, _) = rfc_server(RFC_CLIENT_FIRST).unwrap();
    assert_eq!(
        server.finish(b"c=biws,\xff,p=x").unwrap_err(),
        ScramError::NotUtf8
    );
    // Extensions before the proof are tolerated (and signed).
    let with_extension = RFC_CLIENT_FINAL.replace(",p=", ",x=1,p=");
    assert_eq!(
        rfc_server_finish(&with_extension).unwrap_err(),
        ScramError::BadProof
    );
}

fn rfc_client() -> ClientExchange {
    ClientExchange::with_nonce(Hash::Sha256, "user", "pencil", RFC_CLIENT_NONCE.to_owned()).0
}

#[test]
fn client_refuses_hostile_server_first() {
    let n = RFC_CLIENT_NONCE;
    let s = RFC_SALT;
    let cases = [
        (format!("r={n},s={s},i=4096"), ScramError::NonceMismatch),
        (format!("r=x{n},s={s},i=4096"), ScramError::NonceMismatch),
        (
            format!("r=rOprNGfwEbeRWgbNEkq,s={s},i=4096"),
            ScramError::NonceMismatch,
        ),
        (format!("r={n}x,s={s},i=4095"), ScramError::Iterations(4095)),
        (
            format!("r={n}x,s={s},i=1000001"),
            ScramError::Iterations(1_000_001),
        ),
        (
            format!("r={n}x,s={s},i=4294967296"),
            ScramError::Iterations(4_294_967_296),
        ),
        (
            format!("r={n}x,s={s},i=99999999999999999999999"),
            ScramError::Iterations(u64::MAX),
        ),
        (
            format!("m=x,r={n}x,s={s},i=4096"),
            ScramError::Unsupported("mandatory extension (m=)"),
        ),
        (
            "e=other-error".to_owned(),
            ScramError::Server("other-error".to_owned()),
        ),
    ];
    for (case, expected) in cases {
        assert_eq!(
            rfc_client().respond(case.as_bytes()).unwrap_err(),
            expected,
            "{case}"
        );
    }
    let malformed = [
        String::new(),
        format!("r={n}x"),
        format!("r={n}x,s={s}"),
        format!("r={n}x,i=4096,s={s}"),
        format!("s={s},r={n}x,i=4096"),
        format!("r={n}x,s=,i=4096"),
        format!("r={n}x,s=W22ZaJ0SNY7soEsUEjb6gQ,i=4096"),
        format!("r={n}x,s=W22ZaJ0SNY7soEsUEjb6gQ=,i=4096"),
        format!("r={n}x,s=W22ZaJ0SNY7soEsUEjb6gR==,i=4096"),
        format!("r={n}x,s={s},i=04096"),
        format!("r={n}x,s={s},i=+4096"),
        format!("r={n}x,s={s},i=4096x"),
        format!("r={n}x,s={s},i=-1"),
        format!("r={n}x,s={s},i=0"),
        format!("r={n}x,s={s},i="),
        format!("r={n}x y,s={s},i=4096"),
        format!("r={n}x,s={s},i=4096,"),
        format!("r={n}x,s={s},i=4096,1=2"),
    ];
    for case in &malformed {
        let result = rfc_client().respond(case.as_bytes());
        assert!(
            matches!(result, Err(ScramError::Malformed(_))),
            "{case:?}: {result:?}"
        );
    }
    assert_eq!(
        rfc_client().respond(b"r=\xff").unwrap_err(),
        ScramError::NotUtf8
    );
    // Extensions after the iteration count are tolerated.
    rfc_client()
        .respond(format!("{RFC_SERVER_FIRST},x=1").as_bytes())
        .unwrap();
}

#[test]
fn client_checks_server_final() {
    let responded = || {
        let mut client = rfc_client();
        client.respond(RFC_SERVER_FIRST.as_bytes()).unwrap();
        client
    };
    let wrong = RFC_SERVER_FINAL.replace("v=6r", "v=7r");
    assert_eq!(
        responded().verify(wrong.as_bytes()).unwrap_err(),
        ScramError::ServerSignature
    );
    let short = format!("v={}", BASE64.encode([0; 31]));
    assert_eq!(
        responded().verify(short.as_bytes()).unwrap_err(),
        ScramError::ServerSignature
    );
    assert_eq!(
        responded().verify(b"e=invalid-proof").unwrap_err(),
        ScramError::Server("invalid-proof".to_owned())
    );
    for bad in [&b""[..], b"v=", b"v=!!!!", b"x=1", b"v", b"\xff"] {
        assert!(
            responded().verify(bad).is_err(),
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
    responded()
        .verify(format!("{RFC_SERVER_FINAL},x=1").as_bytes())
        .unwrap();
    let shown = ScramError::Server("bad\nline".to_owned()).to_string();
    assert!(!shown.contains('\n'), "{shown}");
}

#[test]
fn client_steps_in_order() {
    assert_eq!(
        rfc_client()
            .verify(RFC_SERVER_FINAL.as_bytes())
            .unwrap_err(),
        ScramError::OutOfOrder
    );
    let mut client = rfc_client();
    client.respond(RFC_SERVER_FIRST.as_bytes()).unwrap();
    assert_eq!(
        client.respond(RFC_SERVER_FIRST.as_bytes()).unwrap_err(),
        ScramError::OutOfOrder
    );
    let mut failed = rfc_client();
    failed.respond(b"r=x").unwrap_err();
    assert_eq!(
        failed.respond(RFC_SERVER_FIRST.as_bytes()).unwrap_err(),
        ScramError::OutOfOrder
    );
}

mod never_panic {
    use proptest::prelude::*;

    use super::*;

    /// Bytes biased toward SCRAM's syntax, so that parsing gets past its first checks.
    fn scramish() -> impl Strategy<Value = Vec<u8>> {
        let token = prop_oneof![
            Just(b",".to_vec()),
            Just(b"=".to_vec()),
            Just(b"n,,".to_vec()),
            Just(b"y,,".to_vec()),
            Just(b"p=".to_vec()),
            Just(b"a=user,".to_vec()),
            Just(b"n=user,".to_vec()),
            Just(b"r=abc".to_vec()),
            Just(b"c=biws,".to_vec()),
            Just(b"=2C".to_vec()),
            Just(b"=3D".to_vec()),
            Just(b"tokenauth=true".to_vec()),
            Just(b"m=x,".to_vec()),
            Just(BASE64.encode([7; 32]).into_bytes()),
            proptest::collection::vec(any::<u8>(), 0..8),
        ];
        proptest::collection::vec(token, 0..12).prop_map(|tokens| tokens.concat())
    }

    fn finish_after(client_first: &[u8], client_final: &[u8]) {
        if let Ok((server, first)) = ServerExchange::start(Hash::Sha256, client_first, rfc_lookup) {
            let nonce = String::from_utf8(first).unwrap();
            assert!(nonce.starts_with("r="));
            if let Ok((user, last)) = server.finish(client_final) {
                panic!("{user} authenticated with {client_final:?}, answered {last:?}");
            }
        }
    }

    proptest! {
        #[test]
        fn server_on_arbitrary_bytes(first in any::<Vec<u8>>(), last in any::<Vec<u8>>()) {
            finish_after(&first, &last);
        }

        #[test]
        fn server_on_scram_like_bytes(first in scramish(), last in scramish()) {
            finish_after(&first, &last);
        }

        #[test]
        fn server_start_after_a_valid_prefix(rest in scramish(), last in scramish()) {
            let mut first = RFC_CLIENT_FIRST.as_bytes().to_vec();
            first.extend_from_slice(&rest);
            finish_after(&first, &last);
        }

        #[test]
        fn server_finish_after_a_valid_start(last in scramish()) {
            let (server, _) = rfc_server(RFC_CLIENT_FIRST).unwrap();
            let mut message = format!("c=biws,r={RFC_CLIENT_NONCE}{RFC_SERVER_NONCE}").into_bytes();
            message.extend_from_slice(&last);
            prop_assert!(server.finish(&message).is_err());
        }

        #[test]
        fn client_on_arbitrary_bytes(first in scramish(), last in scramish()) {
            let mut client = rfc_client();
            if client.respond(&first).is_ok() {
                prop_assert!(client.verify(&last).is_err());
            }
        }
    }
}
