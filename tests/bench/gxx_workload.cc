// The "gxx" benchmark workload: a template-heavy translation unit for `cc1plus -O2` (the compiler
// step of `g++ -O2 -c`). Every Widget<I> instantiates its own containers, algorithms, variants and
// lambdas, so the compiler allocates millions of tree nodes, RTL and GIMPLE statements.
// BENCH_SCALE (set when the bench preprocesses it once) is how many distinct Widget<I> there are:
// 1 (the default) takes cc1plus about 3 s of CPU here, each more about 1 s; 0 leaves the headers.
#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#ifndef BENCH_SCALE
#define BENCH_SCALE 1
#endif

template <int I>
struct Key {
  int a;
  std::string b;
  bool operator<(const Key &o) const { return std::tie(a, b) < std::tie(o.a, o.b); }
  bool operator==(const Key &o) const { return a == o.a && b == o.b; }
};

template <int I>
struct KeyHash {
  std::size_t operator()(const Key<I> &k) const {
    return std::hash<int>()(k.a) * 31u + std::hash<std::string>()(k.b) + std::size_t(I);
  }
};

template <int I>
struct Payload {
  double x = I;
  std::vector<int> v;
  std::optional<std::string> name;
};

template <int I>
using Value = std::variant<int, double, std::string, Payload<I>, std::vector<Key<I>>>;

template <int I>
struct Widget {
  std::map<Key<I>, std::vector<Payload<I>>> ordered;
  std::unordered_map<Key<I>, Value<I>, KeyHash<I>> hashed;
  std::set<std::pair<Key<I>, int>> pairs;
  std::vector<std::shared_ptr<Payload<I>>> shared;
  std::function<int(const Key<I> &)> score = [](const Key<I> &k) { return k.a * I + int(k.b.size()); };

  static int measure(const Value<I> &v) {
    return std::visit(
        [](const auto &a) -> int {
          using T = std::decay_t<decltype(a)>;
          if constexpr (std::is_same_v<T, std::string>) return int(a.size());
          else if constexpr (std::is_arithmetic_v<T>) return int(a);
          else if constexpr (std::is_same_v<T, Payload<I>>) return int(a.x) + int(a.v.size());
          else return int(a.size());
        },
        v);
  }

  int work(int n) {
    for (int i = 0; i < n; ++i) {
      Key<I> k{i, "k" + std::to_string(i * I)};
      ordered[k].push_back(Payload<I>{double(i), {i, I}, std::nullopt});
      hashed.emplace(k, i % 3 == 0 ? Value<I>(k.b) : i % 3 == 1 ? Value<I>(Payload<I>{}) : Value<I>(i));
      pairs.insert({k, i});
      shared.push_back(std::make_shared<Payload<I>>());
    }
    std::vector<Key<I>> keys;
    for (const auto &[k, v] : ordered) keys.push_back(k);
    std::sort(keys.begin(), keys.end(), [this](const Key<I> &a, const Key<I> &b) { return score(a) > score(b); });
    std::stable_sort(keys.begin(), keys.end());
    auto it = std::unique(keys.begin(), keys.end());
    keys.erase(it, keys.end());
    int total = std::accumulate(keys.begin(), keys.end(), 0,
                                [this](int acc, const Key<I> &k) { return acc + score(k); });
    for (const auto &[k, v] : hashed) total += measure(v);
    std::ostringstream os;
    for (const auto &p : pairs) os << p.first.b << ':' << p.second << ';';
    total += int(os.str().size());
    std::map<int, std::vector<std::tuple<Key<I>, Value<I>>>> grouped;
    for (const auto &[k, v] : hashed) grouped[k.a % 7].emplace_back(k, v);
    for (auto &[g, items] : grouped)
      std::sort(items.begin(), items.end(),
                [](const auto &a, const auto &b) { return std::get<0>(a) < std::get<0>(b); });
    return total + int(grouped.size()) + int(shared.size());
  }
};

template <std::size_t... Is>
int run_all(std::index_sequence<Is...>) {
  return (0 + ... + Widget<int(Is)>{}.work(int(Is) + 3));
}

int bench_entry() { return run_all(std::make_index_sequence<BENCH_SCALE>{}); }
