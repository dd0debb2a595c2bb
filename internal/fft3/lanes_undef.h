// Ends one instruction set's instantiation of lanes_impl.h (see lanes.c).
#undef SFX
#undef W
#undef LOGW
#undef VF
#undef CV
#undef EVEN
#undef ODD
#undef LO
#undef HI
#undef TR0
#undef TR1
