// @tanstack/virtual-core bound to a Preact component: only the rows in view (and a few around) are in the DOM, so a
// 5,000-span trace scrolls like a short one.
import { elementScroll, observeElementOffset, observeElementRect, Virtualizer } from '@tanstack/virtual-core';
import { useLayoutEffect, useMemo, useReducer } from 'preact/hooks';

/**
 * @param {number} count rows
 * @param {{ current: HTMLElement | null }} scrollRef the scrolling element
 * @param {number} rowHeight px
 */
export function useVirtualRows(count, scrollRef, rowHeight) {
  const [, rerender] = useReducer((n) => n + 1, 0);
  const options = {
    count,
    getScrollElement: () => scrollRef.current,
    estimateSize: () => rowHeight,
    overscan: 12,
    observeElementRect,
    observeElementOffset,
    scrollToFn: elementScroll,
    onChange: () => rerender(undefined),
  };
  const v = useMemo(() => new Virtualizer(options), []);
  v.setOptions(options);
  useLayoutEffect(() => v._didMount(), []);
  useLayoutEffect(() => {
    v._willUpdate();
  });
  return v;
}
