/** The seeded PRNG every run of the simulator draws from: @hercules/test-utils' (one implementation for all). */
export { Rng } from '@hercules/test-utils';
