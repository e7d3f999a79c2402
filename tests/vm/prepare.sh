#!/bin/bash
# Prepare the Soft-RoCE test VM: Debian's kernel (the image that
# linux-image-amd64 depends on) and a tiny initramfs (static busybox, the
# kernel modules for rxe/rdma_cm/veth/9p, tests/vm/init).  Everything else the
# guest runs comes from the host's /usr over 9p, so this never needs rebuilding
# when programs or the library change.
#
#   prepare.sh [--cache DIR] [--force]
#
# The cache (default: $abs_top_builddir/tests/vm/cache, or $RSOCKX_VM_CACHE)
# holds the downloaded .debs, vmlinuz and initrd.cpio; a stamp with a hash of all
# inputs makes a second run a no-op.  Prints the cache dir on success.
# Exit 77: the VM cannot be had here (no apt, no package, no network): skip.
set -euo pipefail
# depmod/modprobe live in /usr/sbin, which a normal user's PATH may lack.
export PATH=$PATH:/usr/sbin:/sbin

here=$(cd "$(dirname "$0")" && pwd)
cache=${RSOCKX_VM_CACHE:-}
force=0
while [ $# -gt 0 ]; do
	case $1 in
	--cache) cache=$2; shift 2 ;;
	--force) force=1; shift ;;
	*) echo "prepare.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
if [ -z "$cache" ]; then
	: "${abs_top_builddir:?prepare.sh: set abs_top_builddir, RSOCKX_VM_CACHE or --cache}"
	cache=$abs_top_builddir/tests/vm/cache
fi
mkdir -p "$cache/debs"
cache=$(cd "$cache" && pwd)

say() { echo "prepare.sh: $*" >&2; }
unavailable() { say "CANNOT PREPARE THE VM: $*"; exit 77; }

# Modules the guest loads; dependencies and order come from depmod/modprobe.
# crc32* are crypto algorithms rxe asks for by name (no module dependency);
# sch_netem drops every packet of a link for tests/rdma/faults.sh ("cut").
top_modules="crc32_generic crc32c_generic crc32c-intel rdma_rxe ib_uverbs rdma_ucm
ib_umad veth 9p 9pnet_virtio virtio_pci sch_netem"

# Serialise concurrent prepares on one cache (parallel make check, distcheck).
exec 8>"$cache/.lock"
flock 8

# --- which kernel package?  Resolved now, never hard-coded. ---------------
# apt-cache takes about a second per call here, so the answer is memoised
# until the package lists change (apt-get update).
kpkg=${RSOCKX_VM_KERNEL_PKG:-} kver= bbver=
lists=$(ls -l --time-style=+%s /var/lib/apt/lists 2>/dev/null | sha256sum | cut -d' ' -f1)
if [ -s "$cache/resolved" ] && [ "$(head -n1 "$cache/resolved")" = "$lists ${kpkg:-auto}" ]; then
	read -r kpkg kver bbver < <(sed -n 2p "$cache/resolved")
elif command -v apt-cache >/dev/null; then
	[ -n "$kpkg" ] || kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
		sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\)$/\1/p' | head -n1) || true
	if [ -n "$kpkg" ]; then
		kver=$(apt-cache show --no-all-versions "$kpkg" 2>/dev/null |
			sed -n 's/^Version: //p' | head -n1) || true
	fi
	bbver=$(apt-cache show --no-all-versions busybox-static 2>/dev/null |
		sed -n 's/^Version: //p' | head -n1) || true
	if [ -n "$kpkg" ] && [ -n "$kver" ]; then
		printf '%s\n%s %s %s\n' "$lists ${RSOCKX_VM_KERNEL_PKG:-auto}" "$kpkg" "$kver" "${bbver:--}" >"$cache/resolved"
	fi
fi
[ "$bbver" != - ] || bbver=
if [ -z "$kpkg" ] || [ -z "$kver" ]; then
	# Offline or not Debian: a previous prepare is still good enough.
	if [ -s "$cache/vmlinuz" ] && [ -s "$cache/initrd.cpio" ] && [ -s "$cache/stamp" ]; then
		say "cannot resolve linux-image-amd64 with apt-cache; using cached $(cat "$cache/kernel-release" 2>/dev/null)"
		echo "$cache"
		exit 0
	fi
	unavailable "cannot resolve the kernel package that linux-image-amd64 depends on (apt-cache missing or no package lists)"
fi

# get_deb PKG VERSION: path of the .deb in the cache, downloading it if needed.
get_deb() {
	local pkg=$1 ver=$2 f
	local epochless=${ver#*:}
	for f in "$cache/debs/${pkg}_"*"${epochless}_"*.deb /var/cache/apt/archives/"${pkg}_"*"${epochless}_"*.deb; do
		if [ -s "$f" ]; then echo "$f"; return 0; fi
	done
	command -v apt-get >/dev/null || return 1
	say "downloading $pkg $ver"
	# apt-get download writes into the current directory; as root it warns
	# that the _apt user cannot write there, which is harmless.
	(cd "$cache/debs" && apt-get download -q "$pkg=$ver" 2>&1 | grep -v 'unsandboxed' >&2) || true
	for f in "$cache/debs/${pkg}_"*"${epochless}_"*.deb; do
		if [ -s "$f" ]; then echo "$f"; return 0; fi
	done
	return 1
}

kdeb=$(get_deb "$kpkg" "$kver") || unavailable "could not download $kpkg $kver (apt-get download failed)"

# Static busybox: the host's if it is static, else Debian's busybox-static.
bb=
for f in /usr/bin/busybox /bin/busybox; do
	if [ -x "$f" ] && ! ldd "$f" >/dev/null 2>&1; then bb=$f; break; fi
done
if [ -z "$bb" ]; then
	[ -n "$bbver" ] || unavailable "no static busybox and no busybox-static package"
	bbdeb=$(get_deb busybox-static "$bbver") || unavailable "could not download busybox-static"
	bb=$cache/busybox
	if [ ! -x "$bb" ] || [ "$bbdeb" -nt "$bb" ]; then
		rm -rf "$cache/bb.x" && mkdir "$cache/bb.x"
		dpkg-deb -x "$bbdeb" "$cache/bb.x"
		mv "$cache/bb.x/bin/busybox" "$bb"
		rm -rf "$cache/bb.x"
	fi
fi

# --- up to date? -----------------------------------------------------------
inputs=$({
	echo "$kpkg $kver $(basename "$kdeb")"
	echo "$top_modules"
	sha256sum "$bb" "$here/init" "$0" | cut -d' ' -f1
} | sha256sum | cut -d' ' -f1)
if [ $force = 0 ] && [ -s "$cache/vmlinuz" ] && [ -s "$cache/initrd.cpio" ] &&
	[ "$(cat "$cache/stamp" 2>/dev/null)" = "$inputs" ]; then
	echo "$cache"
	exit 0
fi
say "building kernel + initramfs from $(basename "$kdeb") in $cache"

# --- kernel and modules ------------------------------------------------------
x=$cache/extract
rm -rf "$x" && mkdir -p "$x"
# Only boot/ and lib/modules/ (about 400 MB unpacked; removed again below).
dpkg-deb --fsys-tarfile "$kdeb" | tar -x -C "$x" --wildcards './boot/vmlinuz-*' './lib/modules/*'
krel=$(ls "$x/lib/modules" | head -n1)
[ -n "$krel" ] && [ -s "$x/boot/vmlinuz-$krel" ] || { say "no kernel in $kdeb"; exit 1; }
# The .deb has no modules.dep (postinst makes it): run depmod on the copy.
depmod -b "$x" "$krel"

st=$cache/initrd.d
rm -rf "$st" && mkdir -p "$st"/{bb,modules,proc,sys,dev,tmp,run,vmrun,etc,root,usr,mnt}
: >"$st/modules/order"
for m in $top_modules; do
	modprobe -d "$x" -S "$krel" --show-depends "$m"
done | awk '$1 == "insmod" && !seen[$2]++ { print $2 }' | while read -r ko; do
	name=$(basename "$ko")
	case $name in
	*.ko.xz) xz -dc "$ko" >"$st/modules/${name%.xz}"; name=${name%.xz} ;;
	*.ko.zst) zstd -qdc "$ko" >"$st/modules/${name%.zst}"; name=${name%.zst} ;;
	*.ko.gz) gzip -dc "$ko" >"$st/modules/${name%.gz}"; name=${name%.gz} ;;
	*) cp "$ko" "$st/modules/$name" ;;
	esac
	echo "$name" >>"$st/modules/order"
done
grep -q rdma_rxe "$st/modules/order" || { say "kernel $krel has no rdma_rxe"; exit 1; }

cp "$bb" "$st/bb/busybox"
cp "$here/init" "$st/init"
chmod 755 "$st/init" "$st/bb/busybox"
# Merged /usr: these resolve once the host's /usr is mounted over 9p.
for d in bin sbin lib lib64; do ln -s "usr/$d" "$st/$d"; done

(cd "$st" && find . -mindepth 1 | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0) >"$cache/initrd.cpio.new"
cp "$x/boot/vmlinuz-$krel" "$cache/vmlinuz.new"
# The uncompressed ELF kernel boots straight through its PVH entry: no
# BIOS-side decompression under TCG, about 4 s faster per boot.  Kept only
# if it really is an ELF with a PVH entry note (Xen note type 0x12).
rm -f "$cache/vmlinux" "$cache/vmlinux.new"
off=$(LC_ALL=C grep -abo $'\xfd7zXZ' "$cache/vmlinuz.new" | head -n1 | cut -d: -f1) || true
if [ -n "$off" ] && command -v readelf >/dev/null && command -v xz >/dev/null; then
	tail -c +$((off + 1)) "$cache/vmlinuz.new" | xz -dc --single-stream >"$cache/vmlinux.new" 2>/dev/null || true
	if readelf -n "$cache/vmlinux.new" 2>/dev/null | grep -q 'note type: (0x00000012)'; then
		mv "$cache/vmlinux.new" "$cache/vmlinux"
	else
		rm -f "$cache/vmlinux.new"
	fi
fi
mv "$cache/initrd.cpio.new" "$cache/initrd.cpio"
mv "$cache/vmlinuz.new" "$cache/vmlinuz"
echo "$krel" >"$cache/kernel-release"
rm -rf "$x" "$st"
echo "$inputs" >"$cache/stamp"
say "ready: kernel $krel$([ -f "$cache/vmlinux" ] && echo ' (PVH)'), initramfs $(du -h "$cache/initrd.cpio" | cut -f1)"
echo "$cache"
