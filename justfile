# gak — the commands people type

default:
    @just --list

# run the demo on an embedded SQLite file
demo *ARGS:
    cargo run -p gak-cli -- demo {{ARGS}}

# lint, then every test suite
test: lint
    cargo test --workspace

# regenerate what every host derives from wit/ (and host/sql/store.json); commit the result
gen:
    cargo run -q -p gak-gen

# formatting and clippy, warnings as errors
lint:
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets -- -D warnings

# replay the built-in vectors (or given files) against a store
conformance STORE="memory:" *PATHS:
    cargo run -p gak-cli -- conformance --store {{STORE}} {{PATHS}}

# the property and fuzz suites, much longer than in `test`; the host fuzzers
# (tests/host-protocol/fuzz) with CASES SQL texts under a fresh seed (or SEED), in every host
soak CASES="5000" SEED="":
    PROPTEST_CASES={{CASES}} cargo test --release -p gak-tests --test model --test bad_input -- --nocapture
    seed="{{SEED}}"; cargo run -q -p gak-tests --bin gak-hostfuzz -- --seed "${seed:-$(date +%s)}" --sql {{CASES}} --passwords 200 --retries 200 --out target/soak-fuzz
    GAK_HOST_FUZZ_DIR={{justfile_directory()}}/target/soak-fuzz cargo test -p gak-tests --test host_fuzz --test python --test js --test go -- --nocapture

# the kernel beside native, SQL and ceiling baselines: `just bench --store sqlite:/tmp/b.db` (see README, "Benchmark")
bench *ARGS:
    cargo run --release -p gak-cli -- bench {{ARGS}}

# per-operation latency through the component on every binding
latency N="5000":
    cargo run --release -p gak-examples --example latency -- {{N}}

# operate a store: `just gak tasks list --store sqlite:ops.db` (see README, "Operating gak")
gak *ARGS:
    cargo run -q -p gak-cli -- {{ARGS}}

# write the component and its WIT package for hosts in other languages
component OUT="target/component/gak.wasm" WIT="target/component/wit":
    cargo run -q -p gak-cli -- component --out {{OUT}} --wit {{WIT}}

# per-call latency of the Rust, Python and JavaScript hosts side by side, one run
latency-hosts N="5000":
    python3 host/latency.py {{N}}
