// min / median per-request time over many single runs
import './b2.ts';
