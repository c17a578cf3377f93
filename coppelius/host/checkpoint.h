// checkpoint.h: the checkpoint (coppelius/formats/checkpoint.py, version 3): a 4096-byte header
// with every field the run needs at a fixed offset, then the payload (params, m, v as f32).
//
//   offset  bytes  field
//        0      8  magic "COPPCKPT"
//        8      4  u32 version (3; older versions are refused)
//       12      4  u32 length n of the description JSON at offset 112
//       16      8  u64 step: AdamW steps already taken (t)
//       24      8  u64 cursor: token offset of the next training context
//       32      8  u64 payload bytes
//       40     32  sha256 of the payload
//       72     32  sha256 of the whole 4096-byte header with these 32 bytes zeroed
//      104      8  u64 epoch: times the cursor has gone round the train stream
//      112      n  canonical JSON {"format":"coppelius-checkpoint","learner":L,"model":M,"parts":["params","m","v"]}
//    112+n         zero padding to 4096
// The run compares the description byte for byte with the one its plan expects (L and M are the
// canonical JSON the run table carries), so a checkpoint of another model or learner is refused.
#ifndef COPPELIUS_CHECKPOINT_H
#define COPPELIUS_CHECKPOINT_H
#include <stddef.h>
#include <stdint.h>

#include "failure.h"

enum { CHECKPOINT_HEADER_BYTES = 4096, CHECKPOINT_VERSION = 3, CHECKPOINT_DESCRIPTION_AT = 112 };

typedef struct {
    uint64_t step, cursor, payload_bytes, epoch;
    uint8_t payload_sha256[32];
    uint8_t bytes[CHECKPOINT_HEADER_BYTES];  // the header as read
    uint32_t description_bytes;              // at bytes + CHECKPOINT_DESCRIPTION_AT
} checkpoint_header;

// Magic, version, header digest, and the file's size against payload_bytes. 0, or -1 with the refusal.
int checkpoint_read_header(const char* path, checkpoint_header* h, failure* f);
// The description is the one a checkpoint of this model and learner has (canonical JSON of each).
int checkpoint_check_description(const char* path, const checkpoint_header* h, const char* model, size_t model_bytes,
                                 const char* learner, size_t learner_bytes, failure* f);
// The payload's sha256 is the header's.
int checkpoint_verify_payload(const char* path, const checkpoint_header* h, failure* f);
// The header of a checkpoint with these fields. -1 if the description does not fit.
int checkpoint_encode_header(uint8_t out[CHECKPOINT_HEADER_BYTES], uint64_t step, uint64_t cursor, uint64_t epoch,
                             uint64_t payload_bytes, const uint8_t payload_sha256[32], const char* model,
                             size_t model_bytes, const char* learner, size_t learner_bytes);
#endif
