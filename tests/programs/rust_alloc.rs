// A Rust program for the runtime matrix (tests/integration/compat_cases.py): threads building
// strings, vectors and maps, boxes leaked whole and boxes kept by a static. Built twice: with
// Rust's default allocator (std's System, which calls malloc), and with `--cfg counting`, where a
// #[global_allocator] wrapping System counts every call, so heapsnap's totals have an oracle.
use std::collections::HashMap;
use std::sync::Mutex;
use std::thread;

#[cfg(counting)]
mod counting {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    pub static ALLOCS: AtomicUsize = AtomicUsize::new(0);
    pub static FREES: AtomicUsize = AtomicUsize::new(0);
    pub static REALLOCS: AtomicUsize = AtomicUsize::new(0);
    pub struct Counting;
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, l: Layout) -> *mut u8 {
            ALLOCS.fetch_add(1, Relaxed);
            System.alloc(l)
        }
        unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
            ALLOCS.fetch_add(1, Relaxed);
            System.alloc_zeroed(l)
        }
        unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
            FREES.fetch_add(1, Relaxed);
            System.dealloc(p, l)
        }
        unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
            REALLOCS.fetch_add(1, Relaxed);
            System.realloc(p, l, n)
        }
    }
    #[global_allocator]
    static A: Counting = Counting;
}

static KEPT: Mutex<Vec<&'static mut [u8; 64]>> = Mutex::new(Vec::new());

fn main() {
    let workers: Vec<_> = (0..4)
        .map(|t| {
            thread::spawn(move || {
                let mut words = Vec::new();
                let mut counts: HashMap<String, usize> = HashMap::new();
                for i in 0..20000 {
                    let w = format!("w{}-{}", t, i % 997);
                    *counts.entry(w.clone()).or_insert(0) += 1;
                    words.push(w);
                }
                words.len() + counts.len()
            })
        })
        .collect();
    let total: usize = workers.into_iter().map(|h| h.join().unwrap()).sum();
    for i in 0..100 {
        let b: &'static mut [u8; 64] = Box::leak(Box::new([i as u8; 64]));
        if i % 2 == 0 {
            KEPT.lock().unwrap().push(b); // held by a static: reachable
        } // else: the only pointer is gone: leaked
    }
    #[cfg(counting)]
    {
        use std::sync::atomic::Ordering::Relaxed;
        // Read before printing: println's own buffer is allocated already (first use above? no:
        // the counts are taken here, and printing allocates nothing more once stdout is set up).
        let (a, f, r) = (counting::ALLOCS.load(Relaxed), counting::FREES.load(Relaxed), counting::REALLOCS.load(Relaxed));
        println!("total {} allocs {} frees {} reallocs {}", total, a, f, r);
    }
    #[cfg(not(counting))]
    println!("total {}", total);
}
