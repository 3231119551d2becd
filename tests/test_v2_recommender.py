"""netc.v2's chapter 05 (docs/v2.md): paddle.dataset.movielens over a small ml-1m.zip of GroupLens'
format (Latin-1 '::' lines) written here -- its dictionaries, user and movie records, PaddlePaddle's
train/test split drawn from random.Random(0) one draw per rating line, the samples' layout -- the
sparse_binary_vector data type, the recommender network's parameter count computed by hand from the v2
layer definitions, and the chapter's example training (its test cost falls) and inferring."""
from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import netc.v2 as paddle
from netc.api.errors import Error

ROOT = Path(__file__).resolve().parents[1]
movielens = paddle.dataset.movielens


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setattr(paddle.dataset.common, "DATA_HOME", str(tmp_path / ".cache/paddle/dataset"))
    return tmp_path


def write_movielens(home: Path, movies, users, ratings):
    """movies [(id, title, genres)], users [(id, gender, age, job)], ratings [(user, movie, stars)]."""
    d = home / ".cache/paddle/dataset/movielens"
    d.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(d / "ml-1m.zip", "w") as z:
        z.writestr("ml-1m/movies.dat", "".join(f"{i}::{t}::{'|'.join(g)}\n" for i, t, g in movies).encode("latin-1"))
        z.writestr("ml-1m/users.dat", "".join(f"{i}::{s}::{a}::{j}::0{i}123\n" for i, s, a, j in users))
        z.writestr("ml-1m/ratings.dat", "".join(f"{u}::{m}::{r}::97830{k}\n" for k, (u, m, r) in enumerate(ratings)))


MOVIES = [(1, "Toy Story (1995)", ["Animation", "Comedy"]), (3, "Café Été  (1999)", ["Drama"]),
          (7, "The Toy (1982)", ["Comedy", "Drama"])]
USERS = [(1, "F", 1, 10), (2, "M", 56, 16), (5, "M", 25, 0)]


def test_movielens_records_and_dictionaries(home):
    """Title words split at ASCII white space with ASCII letters lower-cased (Python 2's bytes: 'Café' ->
    'café', 'Été' keeps its 'É'), the year removed; genres and words numbered in sorted order; users'
    gender 0/1, age as its index in age_table; the maxima."""
    write_movielens(home, MOVIES, USERS, [(1, 1, 5)])
    titles = movielens.get_movie_title_dict()
    assert titles == {w: i for i, w in enumerate(sorted(["toy", "story", "café", "Été", "the"]))}
    assert movielens.movie_categories() == {"Animation": 0, "Comedy": 1, "Drama": 2}
    assert (movielens.max_movie_id(), movielens.max_user_id(), movielens.max_job_id()) == (7, 5, 16)
    assert movielens.user_info()[2].value() == [2, 0, 6, 16]
    assert movielens.user_info()[1].value() == [1, 1, 0, 10]
    assert movielens.movie_info()[3].value() == [3, [2], [titles["café"], titles["Été"]]]
    assert movielens.movie_info()[7].value() == [7, [1, 2], [titles["the"], titles["toy"]]]
    assert movielens.age_table == [1, 18, 25, 35, 45, 50, 56]


def test_movielens_split_and_samples(home):
    """A rating line is a test sample when random.Random(0).random() < 0.1 (one draw per line, in the
    file's order); a sample is user.value() + movie.value() + [[stars * 2 - 5]]."""
    rng = np.random.RandomState(0)
    ratings = [(int(rng.choice([1, 2, 5])), int(rng.choice([1, 3, 7])), int(rng.randint(1, 6))) for _ in range(60)]
    write_movielens(home, MOVIES, USERS, ratings)
    draws = random.Random(0)
    is_test = [draws.random() < 0.1 for _ in ratings]
    users, movies = movielens.user_info(), movielens.movie_info()

    def sample(u, m, r):
        return users[u].value() + movies[m].value() + [[r * 2 - 5.0]]
    train, test = list(movielens.train()()), list(movielens.test()())
    assert train == [sample(*r) for r, t in zip(ratings, is_test) if not t]
    assert test == [sample(*r) for r, t in zip(ratings, is_test) if t] and 0 < len(test) < 20
    assert len(list(movielens.test(test_ratio=0.5)())) > len(test)


def test_missing_movielens_file_is_named(home):
    with pytest.raises(Error, match=re.escape("ml-1m.zip") + ".*downloads nothing"):
        movielens.max_user_id()


def test_sparse_binary_vector_feeds_ones_at_its_indices():
    """fc of a sparse_binary_vector: the sum of the weight's rows at the sample's indices (no bias); an
    index out of range is refused, naming the data layer."""
    x = paddle.layer.data(name="sbv_x", type=paddle.data_type.sparse_binary_vector(5))
    y = paddle.layer.fc(input=x, size=3, act=paddle.activation.Linear(), bias_attr=False, name="sbv_fc")
    params = paddle.parameters.create(y)
    w = np.random.RandomState(0).randn(5, 3)
    params["_sbv_fc.w0"] = w
    got = paddle.infer(output_layer=y, parameters=params, input=[([0, 3],), ([],), ([4, 4, 1],)])
    np.testing.assert_allclose(got, [w[0] + w[3], np.zeros(3), w[4] + w[1]], rtol=1e-6, atol=1e-6)
    with pytest.raises(Error, match="sbv_x.*0 .. 4"):
        paddle.infer(output_layer=y, parameters=params, input=[([5],)])


def example_module():
    import importlib.util
    spec = importlib.util.spec_from_file_location("recommender_example", ROOT / "examples/v2/recommender_system.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_recommender_parameter_count(home):
    """The book's network, counted by hand from the v2 layer definitions (embedding tables [V, size], fc
    weights [width, size] and biases [1, size], sequence_conv_pool's fc [3 * 32, 32] and bias; cos_sim,
    the context projection and the pooling have none): U, M, J the maximal ids, C genres, T title words."""
    write_movielens(home, MOVIES, USERS, [(1, 1, 5)])
    mod = example_module()
    score = paddle.layer.cos_sim(a=mod.user_features(), b=mod.movie_features(), size=1, scale=5)
    cost = paddle.layer.square_error_cost(input=score, label=paddle.layer.data(
        name="score", type=paddle.data_type.dense_vector(1)))
    params = paddle.parameters.create(cost)
    u, m, j, c, t = 5, 7, 16, 3, 5
    user = (u + 1) * 32 + 32 * 32 + 32 + 2 * 16 + 16 * 16 + 16 + 7 * 16 + 16 * 16 + 16 + (j + 1) * 16 + 16 * 16 + 16 \
        + (32 + 16 + 16 + 16) * 200 + 200
    movie = (m + 1) * 32 + 32 * 32 + 32 + c * 32 + 32 + t * 32 + 3 * 32 * 32 + 32 + (32 + 32 + 32) * 200 + 200
    assert sum(params[n].size for n in params.names()) == user + movie
    # user: 4 x (table, fc weight, fc bias), its fc of 4 inputs (4 weights, a bias); movie: table, fc weight and
    # bias; genres' fc weight and bias; the title's table; the conv's fc weight and bias; its fc of 3 (3 + 1)
    assert len(params.names()) == 4 * 3 + 5 + 3 + 2 + 1 + 2 + 4


def synthetic_movielens(home, rng, n_users=60, n_movies=40, n_ratings=3000):
    """Users of two tastes (by gender) and movies of two kinds (by genre): a user rates a movie of its
    kind 4 or 5 stars, the other kind 1 or 2."""
    genres = ["Action", "Comedy", "Drama", "Horror"]
    words = [f"Word{i}" for i in range(12)]
    movies = [(i + 1, " ".join(rng.choice(words, rng.randint(1, 4))) + f" ({1980 + i})",
               list(rng.choice(genres[:2] if i % 2 else genres[2:], rng.randint(1, 3)))) for i in range(n_movies)]
    movies = [(i, t, sorted(set(g))) for i, t, g in movies]
    users = [(i + 1, "MF"[i % 2], int(rng.choice([1, 18, 25, 35])), int(rng.randint(0, 21))) for i in range(n_users)]
    ratings = []
    for _ in range(n_ratings):
        u, m = rng.randint(n_users), rng.randint(n_movies)
        liked = (u % 2) == (m % 2)
        ratings.append((u + 1, m + 1, int(rng.choice([4, 5]) if liked else rng.choice([1, 2]))))
    write_movielens(home, movies, users, ratings)


def run_example(tmp_path, *args, passes=4):
    env = {**os.environ, "HOME": str(tmp_path)}
    r = subprocess.run([sys.executable, str(ROOT / "examples/v2/recommender_system.py"), "--passes", str(passes), "--user", "2",
                        "--movie", "4", "--out", str(tmp_path), "--seed", "1", *args],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr
    costs = [float(line.split("cost ")[1]) for line in r.stdout.splitlines() if line.startswith("test after")]
    rating = float(r.stdout.split("movie 4 (")[1].split("): ")[1].split()[0])
    return costs, rating


def test_recommender_example_trains_and_infers(tmp_path):
    """The chapter's network at batches of 256 on 1,500 synthetic ratings (each user likes one kind of
    movie): with the book's Adam(1e-4) the test cost falls in each of 2 passes; at 2e-3 it falls below 0.6 of its
    first value in 4 passes and user 2 (index 1) rates movie 4 (index 3, the kind it likes) above 3
    stars; tar files are written."""
    synthetic_movielens(tmp_path, np.random.RandomState(0), n_ratings=1500)
    costs, _ = run_example(tmp_path, passes=2)
    assert len(costs) == 2 and costs[1] < costs[0], costs
    costs, rating = run_example(tmp_path, "--lr", "2e-3")
    assert len(costs) == 4 and all(b < a for a, b in zip(costs, costs[1:])) and costs[-1] < 0.6 * costs[0], costs
    assert rating > 3.0
    assert (tmp_path / "params_pass_3.tar").exists()
