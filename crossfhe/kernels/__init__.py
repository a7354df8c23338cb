"""Matrix-engine lowering of the ring kernels (CROSS BAT/MAT, Pallas accelerator kernels).

Empty for now: the int8-chunk matrix kernels arrive with the CROSS lowering. They may import only
``crossfhe.math`` and ``crossfhe.ring`` and must be bit-exact with ``crossfhe.ring.ntt``, whose slot
order (``crossfhe.ring.ntt.slot_exponents``) they reproduce.
"""
