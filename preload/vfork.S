/* SPDX-License-Identifier: MIT */
/*
 * pid_t vfork(void)
 *
 * The parent and the child of vfork() share the stack until the child execs
 * or exits, so no C frame of ours may sit between the caller and the real
 * vfork(): the child would return through it and the parent would then
 * resume in a frame the child overwrote.  Call rsx_vfork_prepare() (trace,
 * mark the thread so the child leaves our state alone, return the real
 * vfork), then tail-jump to the real vfork with the caller's return address
 * still on top of the stack.
 */
	.text
	.globl	vfork
	.type	vfork, @function
vfork:
	.cfi_startproc
	endbr64
	subq	$8, %rsp		/* 16-byte alignment for the C call */
	.cfi_adjust_cfa_offset 8
	call	rsx_vfork_prepare
	addq	$8, %rsp
	.cfi_adjust_cfa_offset -8
	jmp	*%rax
	.cfi_endproc
	.size	vfork, .-vfork

	.section .note.GNU-stack, "", @progbits
