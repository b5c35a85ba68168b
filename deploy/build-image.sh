#!/usr/bin/env bash
# Builds both image targets from the Dockerfile without a Docker engine and checks them.
#
# Here nothing can be pulled from a container registry and no container can run, so:
#   1. the base images the Dockerfile names (debian:bookworm-slim, rust:1-bookworm) are made
#      locally: debootstrap of Debian bookworm, slimmed like the official slim image; the Rust one
#      gets this machine's Rust toolchain;
#   2. `podman build --isolation chroot --pull=never` builds `runtime` and `runtime-node`;
#   3. each image's filesystem is mounted and its ENTRYPOINT + CMD run under chroot as the image's
#      user: `--version`, `check` of the default config, then a real `serve` answering health and a
#      demo tool call over gRPC (grpcurl from .venv).
# Podman's storage lives in .ci-cache/podman (project-local; removed with the checkout).
# Needs root and the Debian packages podman, buildah and debootstrap (installed when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
root_dir="$PWD"
state="$root_dir/.ci-cache/podman"
podman=(podman --root "$state/storage" --runroot "$state/run" --storage-driver overlay)
mirror=http://deb.debian.org/debian

# `--remove`: delete the images, their build cache and the base images (about 3 GB), for CI
# steps that come after and need the disk.
if [[ ${1:-} == --remove ]]; then
    if [[ -d $state ]]; then
        "${podman[@]}" system reset --force >/dev/null 2>&1 || true
        rm -rf "$state"
    fi
    exit 0
fi

if ! command -v podman >/dev/null || ! command -v debootstrap >/dev/null; then
    echo "installing podman, buildah and debootstrap (Debian packages)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman buildah debootstrap >/dev/null
fi
mkdir -p "$state"

# Slims a bootstrapped root the way Debian's official -slim images are made: no docs, man pages,
# locales or apt lists, and dpkg told to keep it that way for later installs.
slimify() {
    local rootfs=$1
    cat >"$rootfs/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
    # Also as in the official images: apt keeps no package caches or translations.
    cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
    echo 'Acquire::Languages "none";' >"$rootfs/etc/apt/apt.conf.d/docker-no-languages"
    echo 'Acquire::GzipIndexes "true";' >"$rootfs/etc/apt/apt.conf.d/docker-gzip-indexes"
    echo 'APT::AutoRemove::SuggestsImportant "false";' \
        >"$rootfs/etc/apt/apt.conf.d/docker-autoremove-suggests"
    rm -f "$rootfs"/var/log/{bootstrap.log,alternatives.log,dpkg.log} "$rootfs"/var/log/apt/*
    find "$rootfs/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
    rm -rf "$rootfs"/usr/share/{man,groff,info,lintian,linda}/* "$rootfs"/var/lib/apt/lists/* \
        "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb
    find "$rootfs/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} +
    # The same sources as the official image: the release, its updates and security updates.
    rm -f "$rootfs/etc/apt/sources.list"
    cat >"$rootfs/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
}

# make_base TAG [debootstrap --include list] [function that adds to the root]
make_base() {
    local tag=$1 include=${2:-} extra=${3:-}
    if "${podman[@]}" image exists "$tag"; then
        echo "base image $tag: already made"
        return
    fi
    local rootfs
    rootfs=$(mktemp -d "$state/rootfs.XXXXXX")
    echo "base image $tag: debootstrap bookworm${include:+ + $include}"
    debootstrap --variant=minbase ${include:+--include="$include"} bookworm "$rootfs" "$mirror" \
        >"$state/debootstrap.log" 2>&1 || {
        tail -n 30 "$state/debootstrap.log"
        exit 1
    }
    slimify "$rootfs"
    local changes=(--change 'CMD ["bash"]')
    if [[ -n $extra ]]; then
        local out more
        out=$("$extra" "$rootfs")
        mapfile -t more <<<"$out"
        changes+=("${more[@]}")
    fi
    tar -C "$rootfs" -c . | "${podman[@]}" import --quiet "${changes[@]}" - "$tag" >/dev/null
    rm -rf "$rootfs"
}

# The Rust builder base: this machine's toolchain (the one that builds everything else here),
# laid out like the official rust image: cargo and rustc on PATH, CARGO_HOME=/usr/local/cargo.
add_rust() {
    local rootfs=$1 sysroot
    sysroot=$(rustc --print sysroot)
    mkdir -p "$rootfs/usr/local/rust" "$rootfs/usr/local/cargo"
    cp -a "$sysroot"/{bin,lib,libexec,etc} "$rootfs/usr/local/rust/"
    # Trust what this machine trusts: here crates.io is reached through a TLS-inspecting egress
    # proxy whose CA is only in the host's store (a no-op where there is no such CA).
    if compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
        cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/"
        chroot "$rootfs" update-ca-certificates >/dev/null 2>&1
    fi
    printf '%s\n' \
        --change 'ENV PATH=/usr/local/cargo/bin:/usr/local/rust/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV CARGO_HOME=/usr/local/cargo'
}

echo "--- base images"
make_base docker.io/library/debian:bookworm-slim
make_base docker.io/library/rust:1-bookworm ca-certificates,gcc,libc6-dev,make,git,curl add_rust

echo "--- build"
# The `ca` secret: this machine's CA bundle, for pip behind its TLS-inspecting egress proxy.
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
for target in runtime runtime-node; do
    start=$SECONDS
    "${podman[@]}" build --isolation chroot --pull=never --layers \
        --build-arg VERSION="$version" --build-arg REVISION="$revision" \
        --secret id=ca,src=/etc/ssl/certs/ca-certificates.crt \
        --target "$target" -t "localhost/toolbroker:$target" . >"$state/build-$target.log" 2>&1 || {
        tail -n 60 "$state/build-$target.log"
        echo "podman build of target $target failed (whole log: $state/build-$target.log)" >&2
        exit 1
    }
    echo "built $target in $((SECONDS - start)) s"
done

echo "--- check"
exec python3 "$root_dir/deploy/check-image.py" --version "$version" --revision "$revision" \
    "${podman[@]}"
