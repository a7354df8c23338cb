"""Multi-bit TFHE (key-switch-first programmable bootstrapping) on the shared RNS/NTT substrate."""
