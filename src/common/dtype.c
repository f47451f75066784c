/* dtype and op tables, bf16 conversion. */
#include <string.h>

#include <zen/zen.h>

size_t zen_dtype_size(zen_dtype dtype)
{
    static const size_t sizes[ZEN_DTYPE_COUNT] = { 4, 8, 4, 8, 2 };
    return (unsigned)dtype < ZEN_DTYPE_COUNT ? sizes[dtype] : 0;
}

const char *zen_dtype_name(zen_dtype dtype)
{
    static const char *const names[ZEN_DTYPE_COUNT] = { "f32", "f64", "i32", "i64", "bf16" };
    return (unsigned)dtype < ZEN_DTYPE_COUNT ? names[dtype] : "?";
}

const char *zen_op_name(zen_op op)
{
    static const char *const names[ZEN_OP_COUNT] = { "sum", "prod", "min", "max", "avg" };
    return (unsigned)op < ZEN_OP_COUNT ? names[op] : "?";
}

uint16_t zen_f32_to_bf16(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    if ((bits & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it a quiet NaN */
        return (uint16_t)((bits >> 16) | 0x40u);
    uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u); /* round half to even */
    return (uint16_t)((bits + rounding) >> 16);
}

float zen_bf16_to_f32(uint16_t value)
{
    uint32_t bits = (uint32_t)value << 16;
    float out;
    memcpy(&out, &bits, sizeof out);
    return out;
}
