//go:build !purego

#include "textflag.h"

// CHUNK sets bit k of R when byte k of the sixteen at M needs a look: a
// control byte, '"', '\\' or a byte from 0x80 up. XOR with 0x02 maps '"'
// to 0x20, keeps control bytes below 0x20 and keeps bytes from 0x80 up
// negative, so one signed compare, 0x21 > w, finds all three; an equality
// compare finds '\\'. X7, X8 and X9 hold 0x02, 0x21 and '\\' in every byte.
#define CHUNK(M, R) \
	MOVOU M, X0 \
	MOVO  X0, X1 \
	PXOR  X7, X1 \
	MOVO  X8, X2 \
	PCMPGTB X1, X2 \
	PCMPEQB X9, X0 \
	POR   X0, X2 \
	PMOVMSKB X2, R

// func plainChunks(s []byte) int
TEXT ·plainChunks(SB), NOSPLIT, $0-32
	MOVQ s_base+0(FP), SI
	MOVQ s_len+8(FP), BX
	MOVQ SI, DI
	LEAQ (SI)(BX*1), DX
	// Shorter than one chunk: report nothing plain rather than read
	// outside s (the Go side never calls with fewer than 16 bytes).
	CMPQ BX, $16
	JB   done
	MOVQ $0x0202020202020202, AX
	MOVQ AX, X7
	PUNPCKLQDQ X7, X7
	MOVQ $0x2121212121212121, AX
	MOVQ AX, X8
	PUNPCKLQDQ X8, X8
	MOVQ $0x5c5c5c5c5c5c5c5c, AX
	MOVQ AX, X9
	PUNPCKLQDQ X9, X9

loop32:
	// Two chunks per branch, their flags merged for one test.
	LEAQ 32(SI), AX
	CMPQ AX, DX
	JA   tail
	MOVOU (SI), X0
	MOVOU 16(SI), X3
	MOVO  X0, X1
	PXOR  X7, X1
	MOVO  X8, X2
	PCMPGTB X1, X2
	PCMPEQB X9, X0
	POR   X0, X2
	MOVO  X3, X4
	PXOR  X7, X4
	MOVO  X8, X5
	PCMPGTB X4, X5
	PCMPEQB X9, X3
	POR   X3, X5
	MOVO  X2, X6
	POR   X5, X6
	PMOVMSKB X6, CX
	TESTL CX, CX
	JNZ  found32
	MOVQ AX, SI
	JMP  loop32

found32:
	// The low chunk's flags in bits 0-15, the high one's above.
	PMOVMSKB X2, CX
	PMOVMSKB X5, AX
	SHLL $16, AX
	ORL  AX, CX
	BSFL CX, CX
	ADDQ CX, SI
	JMP  done

tail:
	// Fewer than 32 bytes left: one more whole chunk if there is room.
	LEAQ 16(SI), AX
	CMPQ AX, DX
	JA   last
	CHUNK((SI), CX)
	TESTL CX, CX
	JZ   next16
	BSFL CX, CX
	ADDQ CX, SI
	JMP  done

next16:
	MOVQ AX, SI

last:
	// Fewer than 16 bytes left. The last sixteen bytes of s, read as one
	// chunk, overlap bytes already found plain, which carry no flag, so
	// the chunk's first flag is the first byte from SI on that needs one.
	CMPQ SI, DX
	JEQ  done
	LEAQ -16(DX), AX
	CHUNK((AX), CX)
	TESTL CX, CX
	JZ   whole
	BSFL CX, CX
	LEAQ (AX)(CX*1), SI
	JMP  done

whole:
	MOVQ DX, SI

done:
	SUBQ DI, SI
	MOVQ SI, ret+24(FP)
	RET
