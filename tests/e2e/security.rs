//! Listeners, TLS and SASL with real clients: confluent-kafka and kcat (librdkafka, OpenSSL)
//! over SASL_SSL with SCRAM, PLAIN over SASL_PLAINTEXT, mTLS; SCRAM users managed with
//! Kafka's own APIs; and what an unauthenticated or lying client gets: a clear error, a closed
//! connection, nothing served.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse,
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use sasl::scram::{ClientExchange, Hash};
use test_support::wire::{call, closed, connect, frame, read_response};
use test_support::{Certs, TestBroker};

const SASL_AUTHENTICATION_FAILED: i16 = 58;
const ILLEGAL_SASL_STATE: i16 = 34;
const UNSUPPORTED_SASL_MECHANISM: i16 = 33;

/// A broker with a PLAINTEXT listener (for managing users) and one of `protocol`, TLS from
/// `certs`, and `extra` flags.
fn secured(certs: &Certs, protocol: &str, extra: &[&str]) -> TestBroker {
    let listeners = format!("PLAINTEXT://127.0.0.1:0,{protocol}://127.0.0.1:0");
    let keystore = certs.broker_keystore();
    let mut args = vec![
        "--listeners",
        &listeners,
        "--ssl-keystore-location",
        keystore.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    TestBroker::start_temp(&args)
}

/// Runs a Python script (confluent-kafka); its stdout. Fails the test unless it succeeds.
pub(crate) fn python(script: &str) -> String {
    let out = Command::new("python3")
        .env_remove("LD_LIBRARY_PATH")
        .arg("-c")
        .arg(script)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "python failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Adds (or replaces) `user`'s SCRAM credential over the PLAINTEXT listener with
/// confluent-kafka's AdminClient (AlterUserScramCredentials, as `kafka-configs` sends it).
pub(crate) fn add_scram_user(broker: &TestBroker, user: &str, password: &str, mechanism: &str) {
    let out = python(&format!(
        r#"
from confluent_kafka.admin import AdminClient, UserScramCredentialUpsertion, ScramCredentialInfo, ScramMechanism
a = AdminClient({{'bootstrap.servers': '{addr}'}})
up = UserScramCredentialUpsertion('{user}', ScramCredentialInfo(ScramMechanism.{mechanism}, 8192), b'{password}')
for user, f in a.alter_user_scram_credentials([up]).items():
    f.result()
    print('added', user)
"#,
        addr = broker.listener("PLAINTEXT"),
        mechanism = mechanism.replace('-', "_"),
    ));
    assert!(out.contains(&format!("added {user}")), "{out}");
}

/// confluent-kafka settings for a SASL_SSL client of `certs`' broker.
fn sasl_ssl_conf(addr: &str, certs: &Certs, mechanism: &str, user: &str, password: &str) -> String {
    format!(
        "{{'bootstrap.servers': '{addr}', 'security.protocol': 'SASL_SSL', 'sasl.mechanism': '{mechanism}', \
         'sasl.username': '{user}', 'sasl.password': '{password}', 'ssl.ca.location': '{}'}}",
        certs.ca().display()
    )
}

/// Produces `count` records with `producer_conf`, then reads them back with `consumer_conf`;
/// prints `OK <n>` for the records read.
fn round_trip_script(
    producer_conf: &str,
    consumer_conf: &str,
    topic: &str,
    count: usize,
) -> String {
    format!(
        r#"
from confluent_kafka import Producer, Consumer
p = Producer({producer_conf})
for i in range({count}):
    p.produce('{topic}', value=b'v%d' % i)
assert p.flush(30) == 0, 'not delivered'
c = Consumer(dict({consumer_conf}, **{{'group.id': 'g-{topic}', 'auto.offset.reset': 'earliest'}}))
c.subscribe(['{topic}'])
seen = set()
import time
deadline = time.time() + 30
while len(seen) < {count} and time.time() < deadline:
    m = c.poll(1)
    if m is not None and m.error() is None:
        seen.add(m.value())
c.close()
print('OK', len(seen))
"#
    )
}

/// A client with a wrong password: authentication fails promptly and nothing is delivered.
fn refused_script(conf: &str) -> String {
    format!(
        r#"
from confluent_kafka import Producer
errors = []
delivered = []
p = Producer(dict({conf}, **{{'error_cb': lambda e: errors.append(e), 'message.timeout.ms': 3000}}))
p.produce('refused', value=b'x', on_delivery=lambda err, m: delivered.append(err is None))
p.flush(10)
print('delivered', delivered)
print('errors', ' '.join(str(e.code()) for e in errors))
print('messages', ' | '.join(e.str() for e in errors[:1]))
"#
    )
}

#[test]
fn scram_users_set_with_kafkas_apis_authenticate_over_sasl_ssl_and_survive_a_restart() {
    let certs = Certs::new();
    let mut broker = secured(&certs, "SASL_SSL", &[]);
    add_scram_user(&broker, "alice", "alice-secret", "SCRAM-SHA-512");
    add_scram_user(&broker, "alice", "alice-secret", "SCRAM-SHA-256");
    // Kafka's rules on credentials and on describing them.
    let out = python(&format!(
        r#"
from confluent_kafka.admin import AdminClient, UserScramCredentialUpsertion, UserScramCredentialDeletion, ScramCredentialInfo, ScramMechanism
a = AdminClient({{'bootstrap.servers': '{addr}'}})
weak = UserScramCredentialUpsertion('bob', ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1000), b'pw')
gone = UserScramCredentialDeletion('carol', ScramMechanism.SCRAM_SHA_256)
for user, f in a.alter_user_scram_credentials([weak, gone]).items():
    try:
        f.result(); print(user, 'ok')
    except Exception as e:
        print(user, e.args[0].name())
for user, d in sorted(a.describe_user_scram_credentials().result().items()):
    print('described', user, sorted((str(i.mechanism), i.iterations) for i in d.scram_credential_infos))
try:
    a.describe_user_scram_credentials(['nobody'])['nobody'].result()
except Exception as e:
    print('nobody', e.args[0].name())
"#,
        addr = broker.listener("PLAINTEXT")
    ));
    assert!(out.contains("bob UNACCEPTABLE_CREDENTIAL"), "{out}");
    assert!(out.contains("carol RESOURCE_NOT_FOUND"), "{out}");
    assert!(
        out.contains("described alice [('ScramMechanism.SCRAM_SHA_256', 8192), ('ScramMechanism.SCRAM_SHA_512', 8192)]"),
        "{out}"
    );
    assert!(!out.contains("described bob"), "{out}");
    assert!(out.contains("nobody RESOURCE_NOT_FOUND"), "{out}");

    let addr = broker.listener("SASL_SSL").to_string();
    let sha512 = sasl_ssl_conf(&addr, &certs, "SCRAM-SHA-512", "alice", "alice-secret");
    let sha256 = sasl_ssl_conf(&addr, &certs, "SCRAM-SHA-256", "alice", "alice-secret");
    let out = python(&round_trip_script(&sha512, &sha256, "scram-orders", 200));
    assert!(out.contains("OK 200"), "{out}");

    let wrong = sasl_ssl_conf(&addr, &certs, "SCRAM-SHA-512", "alice", "guess");
    let started = Instant::now();
    let out = python(&refused_script(&wrong));
    assert!(out.contains("delivered [False]"), "{out}");
    assert!(
        out.contains("errors -169"),
        "_AUTHENTICATION expected: {out}"
    );
    assert!(out.contains("Authentication failed"), "{out}");
    assert!(started.elapsed() < Duration::from_secs(20));
    let unknown = sasl_ssl_conf(&addr, &certs, "SCRAM-SHA-512", "mallory", "alice-secret");
    let out = python(&refused_script(&unknown));
    assert!(out.contains("errors -169"), "{out}");

    // Only salted keys are kept, readable by the broker's user alone.
    let file = broker.data_dir.join("scram-credentials");
    let stored = std::fs::read_to_string(&file).unwrap();
    assert!(stored.contains("alice") && !stored.contains("alice-secret"));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    broker.stop();
    broker.restart();
    let addr = broker.listener("SASL_SSL").to_string();
    let sha512 = sasl_ssl_conf(&addr, &certs, "SCRAM-SHA-512", "alice", "alice-secret");
    let out = python(&round_trip_script(&sha512, &sha512, "after-restart", 10));
    assert!(out.contains("OK 10"), "{out}");
}

pub(crate) fn kcat(args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
    // Not the librdkafka the Rust build made (no OpenSSL) that cargo's library path offers.
    let mut child = Command::new("kcat")
        .env_remove("LD_LIBRARY_PATH")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kcat (apt-get install kcat; .ci/run does it)");
    let mut input = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).unwrap();
    }
    drop(input);
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn kcat_speaks_scram_sha_512_over_sasl_ssl_and_metadata_advertises_the_listener_it_came_in_on() {
    let certs = Certs::new();
    let broker = secured(&certs, "SASL_SSL", &[]);
    add_scram_user(&broker, "kc", "kc-secret", "SCRAM-SHA-512");
    let addr = broker.listener("SASL_SSL");
    let ca = certs.ca();
    let secured = |extra: &[&str]| -> Vec<String> {
        let mut args: Vec<String> = [
            "-b",
            addr,
            "-X",
            "security.protocol=SASL_SSL",
            "-X",
            "sasl.mechanism=SCRAM-SHA-512",
            "-X",
            "sasl.username=kc",
            "-X",
            "sasl.password=kc-secret",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.push("-X".into());
        args.push(format!("ssl.ca.location={}", ca.display()));
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    };
    let lines: String = (0..300).map(|i| format!("k{}:v{i}\n", i % 7)).collect();
    let produce = secured(&["-P", "-t", "kc-topic", "-K:"]);
    let (ok, _, err) = kcat(
        &produce.iter().map(String::as_str).collect::<Vec<_>>(),
        Some(&lines),
    );
    assert!(ok, "{err}");
    let consume = secured(&[
        "-C",
        "-t",
        "kc-topic",
        "-o",
        "beginning",
        "-e",
        "-f",
        "%k:%s\n",
    ]);
    let (ok, out, err) = kcat(
        &consume.iter().map(String::as_str).collect::<Vec<_>>(),
        None,
    );
    assert!(ok, "{err}");
    assert_eq!(out.lines().count(), 300, "{err}");
    assert_eq!(out.lines().next(), Some("k0:v0"));
    // Each listener advertises itself: the SASL_SSL port over SASL_SSL, the plaintext one there.
    let metadata = secured(&["-L", "-J"]);
    let (ok, out, err) = kcat(
        &metadata.iter().map(String::as_str).collect::<Vec<_>>(),
        None,
    );
    assert!(ok, "{err}");
    assert!(out.contains(&format!("\"name\":\"{addr}\"")), "{out}");
    let plain = broker.listener("PLAINTEXT");
    let (ok, out, err) = kcat(&["-b", plain, "-L", "-J"], None);
    assert!(ok, "{err}");
    assert!(out.contains(&format!("\"name\":\"{plain}\"")), "{out}");
    assert!(!out.contains(addr), "{out}");
    // A wrong password: kcat reports the authentication failure and reads nothing.
    let mut wrong = secured(&["-L"]);
    let password = wrong
        .iter()
        .position(|a| a == "sasl.password=kc-secret")
        .unwrap();
    wrong[password] = "sasl.password=nope".into();
    wrong.extend(["-m".to_string(), "5".to_string()]);
    let (ok, _, err) = kcat(&wrong.iter().map(String::as_str).collect::<Vec<_>>(), None);
    assert!(!ok);
    assert!(err.contains("Authentication failed"), "{err}");
}

#[test]
fn plain_users_from_a_file_authenticate_over_sasl_plaintext() {
    let certs = Certs::new();
    let users = certs.path("plain-users");
    std::fs::write(&users, "# name=password\nops=ops-secret\n").unwrap();
    let broker = secured(
        &certs,
        "SASL_PLAINTEXT",
        &["--sasl-plain-users-file", users.to_str().unwrap()],
    );
    let addr = broker.listener("SASL_PLAINTEXT");
    let args = |password: &str| -> Vec<String> {
        [
            "-b",
            addr,
            "-X",
            "security.protocol=SASL_PLAINTEXT",
            "-X",
            "sasl.mechanism=PLAIN",
            "-X",
            "sasl.username=ops",
            "-X",
            &format!("sasl.password={password}"),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let mut produce = args("ops-secret");
    produce.extend(["-P", "-t", "plain-topic"].map(String::from));
    let (ok, _, err) = kcat(
        &produce.iter().map(String::as_str).collect::<Vec<_>>(),
        Some("a\nb\nc\n"),
    );
    assert!(ok, "{err}");
    let mut consume = args("ops-secret");
    consume.extend(["-C", "-t", "plain-topic", "-o", "beginning", "-e"].map(String::from));
    let (ok, out, err) = kcat(
        &consume.iter().map(String::as_str).collect::<Vec<_>>(),
        None,
    );
    assert!(ok, "{err}");
    assert_eq!(out.lines().collect::<Vec<_>>(), ["a", "b", "c"]);
    let mut wrong = args("ops-guess");
    wrong.extend(["-L", "-m", "5"].map(String::from));
    let (ok, _, err) = kcat(&wrong.iter().map(String::as_str).collect::<Vec<_>>(), None);
    assert!(!ok);
    assert!(err.contains("Authentication failed"), "{err}");
}

#[test]
fn mtls_requires_a_certificate_signed_by_the_truststore() {
    let certs = Certs::new();
    let ca = certs.ca();
    let broker = secured(
        &certs,
        "SSL",
        &[
            "--ssl-client-auth",
            "required",
            "--ssl-truststore-location",
            ca.to_str().unwrap(),
        ],
    );
    let (key, crt) = certs.client("alice", "/CN=alice/O=acme");
    let addr = broker.listener("SSL");
    let with_cert = format!(
        "{{'bootstrap.servers': '{addr}', 'security.protocol': 'SSL', 'ssl.ca.location': '{}', \
         'ssl.certificate.location': '{}', 'ssl.key.location': '{}'}}",
        ca.display(),
        crt.display(),
        key.display()
    );
    let out = python(&round_trip_script(&with_cert, &with_cert, "mtls", 20));
    assert!(out.contains("OK 20"), "{out}");
    let without = format!(
        "{{'bootstrap.servers': '{addr}', 'security.protocol': 'SSL', 'ssl.ca.location': '{}'}}",
        ca.display()
    );
    let out = python(&refused_script(&without));
    assert!(out.contains("delivered [False]"), "{out}");
    // A certificate from another CA is refused too.
    let other = Certs::new();
    let (key, crt) = other.client("eve", "/CN=eve");
    let foreign = format!(
        "{{'bootstrap.servers': '{addr}', 'security.protocol': 'SSL', 'ssl.ca.location': '{}', \
         'ssl.certificate.location': '{}', 'ssl.key.location': '{}'}}",
        ca.display(),
        crt.display(),
        key.display()
    );
    let out = python(&refused_script(&foreign));
    assert!(out.contains("delivered [False]"), "{out}");
}

/// A raw connection to a SASL_PLAINTEXT listener, and what it is answered.
fn handshake(stream: &mut std::net::TcpStream, mechanism: &str) -> SaslHandshakeResponse {
    call(
        stream,
        ApiKey::SaslHandshake,
        1,
        &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_string(mechanism.into())),
    )
}

fn authenticate(stream: &mut std::net::TcpStream, bytes: Vec<u8>) -> SaslAuthenticateResponse {
    call(
        stream,
        ApiKey::SaslAuthenticate,
        2,
        &SaslAuthenticateRequest::default().with_auth_bytes(bytes.into()),
    )
}

fn metadata(stream: &mut std::net::TcpStream) -> MetadataResponse {
    call(stream, ApiKey::Metadata, 12, &MetadataRequest::default())
}

#[test]
fn a_sasl_listener_serves_nothing_before_authentication_and_ends_every_wrong_exchange() {
    let certs = Certs::new();
    let broker = secured(
        &certs,
        "SASL_PLAINTEXT",
        &["--connection-failed-authentication-delay-ms", "300"],
    );
    add_scram_user(&broker, "raw", "raw-secret", "SCRAM-SHA-256");
    let addr = broker.listener("SASL_PLAINTEXT");

    // ApiVersions is served; Metadata before authentication closes the connection.
    let mut s = connect(addr);
    let versions: ApiVersionsResponse = call(
        &mut s,
        ApiKey::ApiVersions,
        3,
        &ApiVersionsRequest::default(),
    );
    assert!(versions
        .api_keys
        .iter()
        .any(|k| k.api_key == ApiKey::SaslAuthenticate as i16));
    s.write_all(&frame(ApiKey::Metadata, 12, 1, &MetadataRequest::default()))
        .unwrap();
    assert!(closed(&mut s), "Metadata was served before authentication");

    // An unknown mechanism: the enabled ones, then the connection ends.
    let mut s = connect(addr);
    let r = handshake(&mut s, "GSSAPI");
    assert_eq!(r.error_code, UNSUPPORTED_SASL_MECHANISM);
    let offered: Vec<&str> = r.mechanisms.iter().map(|m| m.as_str()).collect();
    assert_eq!(offered, ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"]);
    assert!(closed(&mut s));

    // SaslAuthenticate out of turn.
    let mut s = connect(addr);
    let r = authenticate(&mut s, b"n,,n=raw,r=abc".to_vec());
    assert_eq!(r.error_code, ILLEGAL_SASL_STATE);
    assert!(closed(&mut s));

    // Garbage where SCRAM's client-first-message belongs: refused after the delay.
    let mut s = connect(addr);
    assert_eq!(handshake(&mut s, "SCRAM-SHA-256").error_code, 0);
    let started = Instant::now();
    let r = authenticate(&mut s, vec![0xff, 0x00, b',', b'=']);
    assert_eq!(r.error_code, SASL_AUTHENTICATION_FAILED);
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(closed(&mut s));

    // A whole exchange over the wire, then requests are served as User:raw.
    let mut s = connect(addr);
    assert_eq!(handshake(&mut s, "SCRAM-SHA-256").error_code, 0);
    let (mut client, first) = ClientExchange::new(Hash::Sha256, "raw", "raw-secret");
    let r = authenticate(&mut s, first.clone());
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    let last = client.respond(&r.auth_bytes).unwrap();
    let r = authenticate(&mut s, last.clone());
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    client.verify(&r.auth_bytes).unwrap();
    assert_eq!(metadata(&mut s).brokers.len(), 1);
    // A second handshake on an authenticated connection (re-authentication) is refused.
    assert_eq!(
        handshake(&mut s, "SCRAM-SHA-256").error_code,
        ILLEGAL_SASL_STATE
    );
    assert!(closed(&mut s));

    // Replaying that exchange's client-final-message on a new exchange fails: the server's
    // nonce differs.
    let mut s = connect(addr);
    assert_eq!(handshake(&mut s, "SCRAM-SHA-256").error_code, 0);
    let r = authenticate(&mut s, first);
    assert_eq!(r.error_code, 0);
    let r = authenticate(&mut s, last);
    assert_eq!(r.error_code, SASL_AUTHENTICATION_FAILED);
    assert!(closed(&mut s));

    // The right password's proof for the wrong user's salt: refused without saying why.
    let mut s = connect(addr);
    assert_eq!(handshake(&mut s, "SCRAM-SHA-256").error_code, 0);
    let (mut client, first) = ClientExchange::new(Hash::Sha256, "raw", "not-it");
    let r = authenticate(&mut s, first);
    let last = client.respond(&r.auth_bytes).unwrap();
    let r = authenticate(&mut s, last);
    assert_eq!(r.error_code, SASL_AUTHENTICATION_FAILED);
    assert_eq!(
        r.error_message.as_deref(),
        Some("Authentication failed: invalid credentials")
    );
    assert!(closed(&mut s));

    // Kafka's original framing: after a SaslHandshake v0, bare SCRAM messages both ways.
    let mut s = connect(addr);
    let r: SaslHandshakeResponse = call(
        &mut s,
        ApiKey::SaslHandshake,
        0,
        &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("SCRAM-SHA-256")),
    );
    assert_eq!(r.error_code, 0);
    let bare = |s: &mut std::net::TcpStream, message: &[u8]| {
        let mut frame = (message.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(message);
        s.write_all(&frame).unwrap();
        read_response(s)
    };
    let (mut client, first) = ClientExchange::new(Hash::Sha256, "raw", "raw-secret");
    let server_first = bare(&mut s, &first).expect("server-first-message");
    let last = client.respond(&server_first).unwrap();
    let server_final = bare(&mut s, &last).expect("server-final-message");
    client.verify(&server_final).unwrap();
    assert_eq!(metadata(&mut s).brokers.len(), 1);
    // A wrong proof in bare framing: the connection closes, unanswered.
    let mut s = connect(addr);
    let _: SaslHandshakeResponse = call(
        &mut s,
        ApiKey::SaslHandshake,
        0,
        &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("SCRAM-SHA-256")),
    );
    let (mut client, first) = ClientExchange::new(Hash::Sha256, "raw", "wrong");
    let server_first = bare(&mut s, &first).unwrap();
    let last = client.respond(&server_first).unwrap();
    assert!(bare(&mut s, &last).is_none(), "a wrong proof was answered");

    // The broker is still whole: a plaintext client is served.
    let mut s = connect(broker.listener("PLAINTEXT"));
    assert_eq!(metadata(&mut s).brokers.len(), 1);
}

#[test]
fn unauthenticated_connections_hold_nothing() {
    let certs = Certs::new();
    let broker = secured(
        &certs,
        "SASL_SSL",
        &[
            "--authentication-timeout-ms",
            "1500",
            "--sasl-server-max-receive-size",
            "1024",
            "--metrics-listen",
            "127.0.0.1:0",
        ],
    );
    let addr = broker.listener("SASL_SSL");

    // A plaintext Kafka request on the TLS listener: closed, not answered.
    let mut s = connect(addr);
    s.write_all(&frame(
        ApiKey::ApiVersions,
        3,
        1,
        &ApiVersionsRequest::default(),
    ))
    .unwrap();
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).unwrap();
    assert!(
        answer.is_empty() || answer[0] == 0x15,
        "not a TLS alert: {answer:?}"
    );

    // Half a TLS ClientHello, then silence: closed by the authentication timeout.
    let mut s = connect(addr);
    s.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00])
        .unwrap();
    let started = Instant::now();
    assert!(closed(&mut s));
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(1000) && waited < Duration::from_secs(8),
        "{waited:?}"
    );

    // Both count as failed TLS handshakes.
    let metrics = broker.metrics_addr.clone().unwrap();
    let mut http = std::net::TcpStream::connect(&metrics).unwrap();
    http.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    http.read_to_string(&mut text).unwrap();
    let tls_failures: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("lograil_authentication_failures_total{step=\"tls\"} "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no TLS failure count in\n{text}"));
    assert!(tls_failures >= 2, "{tls_failures}");

    // Over TLS, a request larger than sasl.server.max.receive.size before authentication
    // closes the connection (librdkafka with a 2 KiB client id).
    let out = python(&format!(
        r#"
from confluent_kafka import Producer
errors = []
p = Producer({{'bootstrap.servers': '{addr}', 'security.protocol': 'SASL_SSL', 'sasl.mechanism': 'PLAIN',
  'sasl.username': 'u', 'sasl.password': 'p', 'ssl.ca.location': '{ca}', 'client.id': 'x' * 2048,
  'error_cb': lambda e: errors.append(e), 'message.timeout.ms': 3000}})
delivered = []
p.produce('t', b'x', on_delivery=lambda err, m: delivered.append(err is None))
p.flush(8)
print('delivered', delivered)
"#,
        ca = certs.ca().display()
    ));
    assert!(out.contains("delivered [False]"), "{out}");
    let log = std::fs::read_to_string(broker.log_path()).unwrap();
    assert!(
        log.contains("exceeds the 1024-byte limit (--sasl-server-max-receive-size)"),
        "{log}"
    );
    assert!(!log.contains("panicked"), "{log}");
}

/// `lograil_client_throttled_responses_total` of `client_id` in a scrape of `/metrics`.
fn throttled_responses(metrics_addr: &str, client_id: &str) -> u64 {
    let mut http = std::net::TcpStream::connect(metrics_addr).unwrap();
    http.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    http.read_to_string(&mut text).unwrap();
    let prefix = format!("lograil_client_throttled_responses_total{{client_id=\"{client_id}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn user_quotas_apply_to_the_authenticated_principal() {
    let certs = Certs::new();
    let users = certs.path("plain-users");
    std::fs::write(&users, "alice=a-secret\nbob=b-secret\n").unwrap();
    let broker = secured(
        &certs,
        "SASL_PLAINTEXT",
        &[
            "--sasl-plain-users-file",
            users.to_str().unwrap(),
            "--metrics-listen",
            "127.0.0.1:0",
        ],
    );
    let plain = broker.listener("PLAINTEXT").to_string();
    test_support::lograil_stdout(&[
        "quota",
        "set",
        "--bootstrap-server",
        &plain,
        "--user",
        "alice",
        "--producer-byte-rate",
        "20000",
    ]);
    let addr = broker.listener("SASL_PLAINTEXT");
    // The same client id for both users: only the user tells them apart.
    let produce = |user: &str, password: &str| {
        let args: Vec<String> = [
            "-b",
            addr,
            "-X",
            "security.protocol=SASL_PLAINTEXT",
            "-X",
            "sasl.mechanism=PLAIN",
            "-X",
            &format!("sasl.username={user}"),
            "-X",
            &format!("sasl.password={password}"),
            "-X",
            &format!("client.id=shared-{user}"),
            "-P",
            "-t",
            "quota-topic",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let lines: String = (0..400).map(|i| format!("{i:0>1000}\n")).collect();
        let (ok, _, err) = kcat(
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
            Some(&lines),
        );
        assert!(ok, "{err}");
    };
    produce("bob", "b-secret");
    produce("alice", "a-secret");
    let metrics = broker.metrics_addr.clone().unwrap();
    assert_eq!(throttled_responses(&metrics, "shared-bob"), 0);
    assert!(throttled_responses(&metrics, "shared-alice") > 0);
}

/// `kcat -L` over SSL trusting `ca`: whether it listed the cluster.
fn kcat_lists_over_ssl(addr: &str, ca: &std::path::Path) -> bool {
    let ca = format!("ssl.ca.location={}", ca.display());
    let (ok, out, _) = kcat(
        &[
            "-b",
            addr,
            "-X",
            "security.protocol=SSL",
            "-X",
            &ca,
            "-L",
            "-m",
            "5",
        ],
        None,
    );
    ok && out.contains("1 brokers")
}

/// The TLS version `openssl s_client` negotiates when limited to `flag` (`-tls1_2`), if any.
fn negotiated(addr: &str, ca: &std::path::Path, flag: &str) -> Option<String> {
    let out = Command::new("openssl")
        .args(["s_client", flag, "-connect", addr, "-CAfile"])
        .arg(ca)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    // "New, TLSv1.3, Cipher is ..." once a session is set up ("New, (NONE), ..." otherwise).
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("New, ")?.split(',').next())
        .filter(|p| p.starts_with("TLSv"))
        .map(str::to_string)
}

#[test]
fn a_renewed_certificate_is_served_without_a_restart_and_tls_versions_are_as_configured() {
    let first = Certs::new();
    let broker = secured(&first, "SSL", &[]);
    let addr = broker.listener("SSL").to_string();
    assert!(kcat_lists_over_ssl(&addr, &first.ca()));
    assert_eq!(
        negotiated(&addr, &first.ca(), "-tls1_2").as_deref(),
        Some("TLSv1.2")
    );
    assert_eq!(
        negotiated(&addr, &first.ca(), "-tls1_3").as_deref(),
        Some("TLSv1.3")
    );

    // The keystore file is replaced by one from another CA: new handshakes get it.
    let renewed = Certs::new();
    std::thread::sleep(Duration::from_millis(20));
    std::fs::copy(renewed.broker_keystore(), first.broker_keystore()).unwrap();
    assert!(kcat_lists_over_ssl(&addr, &renewed.ca()));
    assert!(!kcat_lists_over_ssl(&addr, &first.ca()));
    // A keystore that no longer parses: the last good certificate stays in use.
    std::fs::write(first.broker_keystore(), "not a keystore").unwrap();
    assert!(kcat_lists_over_ssl(&addr, &renewed.ca()));
    let log = std::fs::read_to_string(broker.log_path()).unwrap();
    assert!(log.contains("serving the previous certificate"), "{log}");

    // TLS 1.3 only.
    let strict = secured(&renewed, "SSL", &["--ssl-enabled-protocols", "TLSv1.3"]);
    let addr = strict.listener("SSL").to_string();
    assert_eq!(negotiated(&addr, &renewed.ca(), "-tls1_2"), None);
    assert_eq!(
        negotiated(&addr, &renewed.ca(), "-tls1_3").as_deref(),
        Some("TLSv1.3")
    );
}

/// A whole SCRAM-SHA-256 exchange on `s` as `user`; the final SaslAuthenticate response.
fn scram_exchange(
    s: &mut std::net::TcpStream,
    user: &str,
    password: &str,
) -> SaslAuthenticateResponse {
    assert_eq!(handshake(s, "SCRAM-SHA-256").error_code, 0);
    let (mut client, first) = ClientExchange::new(Hash::Sha256, user, password);
    let r = authenticate(s, first);
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    let last = client.respond(&r.auth_bytes).unwrap();
    authenticate(s, last)
}

#[test]
fn sessions_last_connections_max_reauth_ms_and_clients_authenticate_again() {
    let certs = Certs::new();
    let broker = secured(
        &certs,
        "SASL_PLAINTEXT",
        &["--connections-max-reauth-ms", "1500"],
    );
    add_scram_user(&broker, "re", "re-secret", "SCRAM-SHA-256");
    add_scram_user(&broker, "other", "other-secret", "SCRAM-SHA-256");
    let addr = broker.listener("SASL_PLAINTEXT");

    let mut s = connect(addr);
    let started = Instant::now();
    let done = scram_exchange(&mut s, "re", "re-secret");
    assert_eq!(done.error_code, 0);
    assert_eq!(done.session_lifetime_ms, 1500);
    assert_eq!(metadata(&mut s).brokers.len(), 1);
    // Again as the same user within the lifetime: the session starts over.
    std::thread::sleep(Duration::from_millis(1000).saturating_sub(started.elapsed()));
    let again = Instant::now();
    assert_eq!(scram_exchange(&mut s, "re", "re-secret").error_code, 0);
    std::thread::sleep(Duration::from_millis(1800).saturating_sub(started.elapsed()));
    assert_eq!(
        metadata(&mut s).brokers.len(),
        1,
        "served past the first lifetime"
    );
    // Past the second lifetime without authenticating again: the next request closes it.
    std::thread::sleep(Duration::from_millis(1700).saturating_sub(again.elapsed()));
    s.write_all(&frame(ApiKey::Metadata, 12, 1, &MetadataRequest::default()))
        .unwrap();
    assert!(
        closed(&mut s),
        "a request after the session expired was served"
    );

    // Re-authenticating as someone else is refused and ends the connection.
    let mut s = connect(addr);
    assert_eq!(scram_exchange(&mut s, "re", "re-secret").error_code, 0);
    let r = scram_exchange(&mut s, "other", "other-secret");
    assert_eq!(r.error_code, SASL_AUTHENTICATION_FAILED);
    assert!(closed(&mut s));

    // librdkafka re-authenticates on its own: a producer outlives several session lifetimes.
    let conf = format!(
        "{{'bootstrap.servers': '{addr}', 'security.protocol': 'SASL_PLAINTEXT', \
         'sasl.mechanism': 'SCRAM-SHA-256', 'sasl.username': 're', 'sasl.password': 're-secret'}}"
    );
    let out = python(&format!(
        r#"
import time
from confluent_kafka import Producer
delivered = []
p = Producer({conf})
for i in range(25):
    p.produce('reauth', value=b'%d' % i, on_delivery=lambda err, m: delivered.append(err is None))
    p.poll(0)
    time.sleep(0.2)
p.flush(10)
print('delivered', sum(delivered), len(delivered))
"#
    ));
    assert!(out.contains("delivered 25 25"), "{out}");
    let log = std::fs::read_to_string(broker.log_path()).unwrap();
    let rdkafka: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("client_id=\"rdkafka\""))
        .collect();
    let authenticated = rdkafka
        .iter()
        .filter(|l| l.contains("authenticated principal=User:re"))
        .count();
    assert!(
        authenticated >= 4,
        "{authenticated} authentications of librdkafka:\n{log}"
    );
    assert!(
        !rdkafka.iter().any(|l| l.contains("session expired")),
        "librdkafka's session ran out:\n{log}"
    );
}

#[test]
fn authenticated_principals_get_what_their_acls_allow_and_nothing_else() {
    let certs = Certs::new();
    let users = certs.path("plain-users");
    std::fs::write(
        &users,
        "admin=admin-secret\nalice=alice-secret\nbob=bob-secret\n",
    )
    .unwrap();
    // The subject as RFC 2253 writes it, last RDN first: `CN=carol,O=acme`.
    let (carol_key, carol_crt) = certs.client("carol", "/O=acme/CN=carol");
    let keystore = certs.broker_keystore();
    let ca = certs.ca();
    let broker = TestBroker::start_temp(&[
        "--listeners",
        "SASL_PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "--ssl-keystore-location",
        keystore.to_str().unwrap(),
        "--ssl-truststore-location",
        ca.to_str().unwrap(),
        "--ssl-client-auth",
        "required",
        "--sasl-plain-users-file",
        users.to_str().unwrap(),
        "--authorizer-class-name",
        "acl",
        "--super-users",
        "User:admin",
    ]);
    let sasl = broker.listener("SASL_PLAINTEXT");
    let ssl = broker.listener("SSL");
    let user = |name: &str| {
        format!(
            "{{'bootstrap.servers': '{sasl}', 'security.protocol': 'SASL_PLAINTEXT', \
             'sasl.mechanism': 'PLAIN', 'sasl.username': '{name}', 'sasl.password': '{name}-secret'}}"
        )
    };
    let carol = format!(
        "{{'bootstrap.servers': '{ssl}', 'security.protocol': 'SSL', 'ssl.ca.location': '{}', \
         'ssl.certificate.location': '{}', 'ssl.key.location': '{}'}}",
        ca.display(),
        carol_crt.display(),
        carol_key.display()
    );
    let out = python(&format!(
        r#"
import time
from confluent_kafka import Producer, Consumer, TopicPartition, ShareConsumer, KafkaException
from confluent_kafka.admin import (AdminClient, NewTopic, AclBinding, ResourceType,
    ResourcePatternType, AclOperation, AclPermissionType, ConfigResource)
ADMIN, ALICE, BOB, CAROL = {admin}, {alice}, {bob}, {carol}
admin = AdminClient(ADMIN)
for f in admin.create_topics([NewTopic('orders', 1, 1)]).values(): f.result()
def allow(principal, rtype, name, op):
    return AclBinding(rtype, name, ResourcePatternType.LITERAL, principal, '*', op, AclPermissionType.ALLOW)
acls = [allow('User:alice', ResourceType.TOPIC, 'orders', op) for op in (AclOperation.READ, AclOperation.WRITE)]
acls += [allow('User:alice', ResourceType.GROUP, 'g-alice', AclOperation.READ)]
acls += [allow('User:CN=carol,O=acme', ResourceType.TOPIC, 'orders', AclOperation.READ)]
acls += [allow('User:CN=carol,O=acme', ResourceType.GROUP, 'g-carol', AclOperation.READ)]
acls += [allow('User:bob', ResourceType.GROUP, 'g-bob', AclOperation.READ)]
acls += [allow('User:bob', ResourceType.GROUP, 'sg-bob', AclOperation.READ)]
for f in admin.create_acls(acls).values(): f.result()

def produce(conf, n):
    done = []
    p = Producer(dict(conf, **{{'message.timeout.ms': 5000}}))
    for i in range(n):
        p.produce('orders', b'%d' % i, on_delivery=lambda err, m: done.append(err.name() if err else 'ok'))
    p.flush(10)
    return sorted(set(done))
def consume(conf, group, n):
    c = Consumer(dict(conf, **{{'group.id': group, 'auto.offset.reset': 'earliest'}}))
    c.subscribe(['orders'])
    got, errors, deadline = 0, set(), time.time() + 20
    while got < n and time.time() < deadline:
        m = c.poll(0.5)
        if m is None: continue
        if m.error(): errors.add(m.error().name()); break
        got += 1
    c.close()
    return got, sorted(errors)
def attempt(f):
    try:
        return repr(f())
    except KafkaException as e:
        return e.args[0].name()

print('alice produce', produce(ALICE, 5))
print('bob produce', produce(BOB, 1))
print('alice consume', consume(ALICE, 'g-alice', 5))
print('carol consume', consume(CAROL, 'g-carol', 5))
print('bob consume', consume(BOB, 'g-bob', 1))
print('bob lists', sorted(AdminClient(BOB).list_topics(timeout=10).topics))
print('alice lists', sorted(AdminClient(ALICE).list_topics(timeout=10).topics))
bob = Consumer(dict(BOB, **{{'group.id': 'g-bob'}}))
print('bob offsets', attempt(lambda: bob.get_watermark_offsets(TopicPartition('orders', 0), timeout=10)))
committed = bob.committed([TopicPartition('orders', 0)], timeout=10)
print('bob committed', [tp.error.name() if tp.error else tp.offset for tp in committed])
bob.close()
res = ConfigResource('topic', 'orders')
bob_admin = AdminClient(BOB)
print('bob configs', attempt(lambda: bob_admin.describe_configs([res])[res].result(timeout=10)))
share = ShareConsumer(dict(BOB, **{{'group.id': 'sg-bob'}}))
share.subscribe(['orders'])
errors, deadline = set(), time.time() + 10
while not errors and time.time() < deadline:
    try:
        for m in share.poll(0.5) or []:
            if m.error(): errors.add(m.error().name())
    except KafkaException as e:
        errors.add(e.args[0].name())
print('bob share', sorted(errors))
"#,
        admin = user("admin"),
        alice = user("alice"),
        bob = user("bob"),
    ));
    assert!(out.contains("alice produce ['ok']"), "{out}");
    assert!(
        out.contains("bob produce ['TOPIC_AUTHORIZATION_FAILED']"),
        "{out}"
    );
    assert!(out.contains("alice consume (5, [])"), "{out}");
    assert!(
        out.contains("carol consume (5, [])"),
        "mTLS principal:\n{out}"
    );
    assert!(
        out.contains("bob consume (0, ['TOPIC_AUTHORIZATION_FAILED'])"),
        "{out}"
    );
    assert!(out.contains("bob lists []"), "{out}");
    assert!(out.contains("alice lists ['orders']"), "{out}");
    // librdkafka asks Metadata first, which hides the topic: either way, no offsets.
    assert!(
        out.contains("bob offsets TOPIC_AUTHORIZATION_FAILED")
            || out.contains("bob offsets _UNKNOWN_PARTITION"),
        "{out}"
    );
    assert!(
        out.contains("bob committed ['TOPIC_AUTHORIZATION_FAILED']"),
        "{out}"
    );
    assert!(
        out.contains("bob configs TOPIC_AUTHORIZATION_FAILED"),
        "{out}"
    );
    assert!(
        out.contains("bob share ['TOPIC_AUTHORIZATION_FAILED']"),
        "{out}"
    );

    // On the wire, as bob: Fetch and ListOffsets are refused per partition, no records.
    let mut s = connect(sasl);
    assert_eq!(handshake(&mut s, "PLAIN").error_code, 0);
    assert_eq!(
        authenticate(&mut s, sasl::plain::encode("bob", "bob-secret")).error_code,
        0
    );
    let fetched: kafka_protocol::messages::FetchResponse = call(
        &mut s,
        ApiKey::Fetch,
        12,
        &test_support::kafka::fetch_request("orders", 0, 0, 1 << 20),
    );
    let partition = &fetched.responses[0].partitions[0];
    assert_eq!(partition.error_code, 29);
    assert!(partition.records.as_ref().is_none_or(|r| r.is_empty()));
    let request = kafka_protocol::messages::ListOffsetsRequest::default()
        .with_replica_id((-1).into())
        .with_topics(vec![
            kafka_protocol::messages::list_offsets_request::ListOffsetsTopic::default()
                .with_name(test_support::kafka::name("orders"))
                .with_partitions(vec![
                    kafka_protocol::messages::list_offsets_request::ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_timestamp(-1),
                ]),
        ]);
    let listed: kafka_protocol::messages::ListOffsetsResponse =
        call(&mut s, ApiKey::ListOffsets, 7, &request);
    let partition = &listed.topics[0].partitions[0];
    assert_eq!(partition.error_code, 29);
    assert_eq!(partition.offset, -1);
}

#[test]
fn lograils_own_client_and_tools_speak_sasl_ssl_with_a_command_config() {
    let certs = Certs::new();
    let broker = secured(&certs, "SASL_SSL", &[]);
    add_scram_user(&broker, "tool", "tool-secret", "SCRAM-SHA-512");
    let config = certs.path("client.properties");
    std::fs::write(
        &config,
        format!(
            "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n\
             sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \
             username=\"tool\" password=\"tool-secret\";\n\
             ssl.truststore.type=PEM\nssl.truststore.location={}\n",
            certs.ca().display()
        ),
    )
    .unwrap();
    let addr = broker.listener("SASL_SSL");
    let config = config.to_str().unwrap();
    let mut produce = Command::new(test_support::broker::lograil_bin())
        .args([
            "produce",
            "--bootstrap-server",
            addr,
            "--command-config",
            config,
        ])
        .args(["--topic", "tooling"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    produce
        .stdin
        .take()
        .unwrap()
        .write_all(b"one\ntwo\nthree\n")
        .unwrap();
    let out = produce.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let consumed = test_support::lograil_stdout(&[
        "consume",
        "--bootstrap-server",
        addr,
        "--command-config",
        config,
        "--topic",
        "tooling",
        "--from-beginning",
        "--max-messages",
        "3",
    ]);
    assert_eq!(
        consumed
            .lines()
            .map(|l| l.rsplit('\t').next().unwrap())
            .collect::<Vec<_>>(),
        ["one", "two", "three"]
    );
    // A wrong password: the tool fails at once, saying why.
    let wrong = certs.path("wrong.properties");
    std::fs::write(
        &wrong,
        std::fs::read_to_string(config)
            .unwrap()
            .replace("tool-secret", "nope"),
    )
    .unwrap();
    let started = Instant::now();
    let (ok, _, err) = test_support::lograil(&[
        "topic",
        "list",
        "--bootstrap-server",
        addr,
        "--command-config",
        wrong.to_str().unwrap(),
    ]);
    assert!(!ok);
    assert!(err.contains("Authentication failed"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10));
}
