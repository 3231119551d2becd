"""paddle.dataset.movielens: the MovieLens 1M ratings, PaddlePaddle v2's readers over its cache file
DATA_HOME/movielens/ml-1m.zip (GroupLens' zip: ml-1m/movies.dat, ml-1m/users.dat, ml-1m/ratings.dat,
'::'-separated lines in Latin-1).

As PaddlePaddle's module (python/paddle/v2/dataset/movielens.py):

* movies.dat `id::title (year)::genre|genre...`: MovieInfo(index, categories, title without its
  '(year)'); the title's words (split at ASCII white space, ASCII letters lower-cased, as Python 2's
  bytes do) numbered in get_movie_title_dict(), the genres in movie_categories();
* users.dat `id::gender::age::occupation::zip`: UserInfo(index, is_male, age = its position in
  age_table, job_id);
* train() / test() (rand_seed=0, test_ratio=0.1): reader creators over ratings.dat
  `user::movie::rating::time`; a line goes to the test set when random.Random(rand_seed).random() <
  test_ratio (one draw per line, in order: Python's Mersenne Twister, the same draws as PaddlePaddle's
  Python 2); a sample is user.value() + movie.value() + [[rating * 2 - 5]]:
  [user id, gender (0 male, 1 female), age index, job id, movie id, [category ids], [title word ids],
  [score]];
* max_user_id(), max_movie_id(), max_job_id(), user_info(), movie_info().

One difference: PaddlePaddle numbers the title words and the categories in the order its Python 2 set
iterates them (a hash order no later Python reproduces); netc.v2 numbers them in sorted order. The
numbers differ, the dictionaries' sizes and meaning do not. The file is read once per path and
modification time; a missing file is a located error naming it (netc.v2 downloads nothing)."""
from __future__ import annotations

import functools
import os
import random
import re
import zipfile

from ...api.errors import error, user_loc
from ..names import missing_names
from .common import cached

URL = "http://files.grouplens.org/datasets/movielens/ml-1m.zip"
age_table = [1, 18, 25, 35, 45, 50, 56]
_TITLE = re.compile(r"^(.*)\((\d+)\)$")
_SPACE = re.compile(r"[ \t\n\r\x0b\x0c]+")        # Python 2's bytes.split() white space
_UPPER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def words(text: str) -> list:
    """A title's words as PaddlePaddle's Python 2 reads them from bytes: split at ASCII white space."""
    return [w for w in _SPACE.split(text) if w]


class MovieInfo:
    """A movie: index (its id), categories (genre names), title (without the year)."""

    def __init__(self, index, categories, title):
        self.index, self.categories, self.title = int(index), categories, title

    def value(self):
        meta = _META[-1]
        return [self.index, [meta["categories"][c] for c in self.categories],
                [meta["titles"][w.translate(_UPPER)] for w in words(self.title)]]

    def __repr__(self):
        return f"<MovieInfo id({self.index}), title({self.title}), categories({self.categories})>"


class UserInfo:
    """A user: index (its id), is_male, age (the index of its age group in age_table), job_id."""

    def __init__(self, index, gender, age, job_id):
        self.index, self.is_male = int(index), gender == "M"
        self.age, self.job_id = age_table.index(int(age)), int(job_id)

    def value(self):
        return [self.index, 0 if self.is_male else 1, self.age, self.job_id]

    def __repr__(self):
        return (f"<UserInfo id({self.index}), gender({'M' if self.is_male else 'F'}), age({age_table[self.age]}), "
                f"job({self.job_id})>")


_META: list = [{}]            # [the last file's meta information]: movies, users, titles, categories, key


def _lines(package, member, path, loc):
    try:
        data = package.read(member)
    except KeyError:
        raise error(f"paddle.dataset.movielens: '{path}' has no member '{member}'", loc) from None
    return [line for line in data.decode("latin-1").splitlines() if line.strip()]


def _fields(line, n, member, i, loc):
    parts = line.strip().split("::")
    if len(parts) != n:
        raise error(f"paddle.dataset.movielens: {member} line {i + 1} has {len(parts)} '::' fields, not {n}: "
                    f"{line!r}", loc)
    return parts


def _parse(path, loc) -> dict:
    movies, users, titles, cats = {}, {}, set(), set()
    try:
        package = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as e:
        raise error(f"paddle.dataset.movielens: '{path}' is no zip file ({e})", loc) from None
    with package:
        for i, line in enumerate(_lines(package, "ml-1m/movies.dat", path, loc)):
            movie_id, title, categories = _fields(line, 3, "ml-1m/movies.dat", i, loc)
            m = _TITLE.match(title)
            if m is None or not movie_id.isdigit():
                raise error(f"paddle.dataset.movielens: ml-1m/movies.dat line {i + 1}: no 'id::title (year)::genres'"
                            f": {line!r}", loc)
            categories = categories.split("|")
            cats.update(categories)
            movies[int(movie_id)] = MovieInfo(movie_id, categories, m.group(1))
            titles.update(w.translate(_UPPER) for w in words(m.group(1)))
        for i, line in enumerate(_lines(package, "ml-1m/users.dat", path, loc)):
            uid, gender, age, job, _ = _fields(line, 5, "ml-1m/users.dat", i, loc)
            try:
                users[int(uid)] = UserInfo(uid, gender, age, job)
            except ValueError:
                raise error(f"paddle.dataset.movielens: ml-1m/users.dat line {i + 1}: an age of {age_table} and "
                            f"integer ids expected: {line!r}", loc) from None
    return {"movies": movies, "users": users, "titles": {w: i for i, w in enumerate(sorted(titles))},
            "categories": {c: i for i, c in enumerate(sorted(cats))}}


def _meta(loc=None) -> dict:
    """The file's meta information, read once per path and modification time."""
    loc = loc or user_loc()
    path = cached(URL, "movielens")
    key = (path, os.stat(path).st_mtime_ns)
    if _META[-1].get("key") != key:
        _META[-1] = {**_parse(path, loc), "key": key}
    return _META[-1]


def _reader(rand_seed=0, test_ratio=0.1, is_test=False, loc=None):
    meta = _meta(loc)
    rand = random.Random(rand_seed)
    with zipfile.ZipFile(meta["key"][0]) as package:
        lines = _lines(package, "ml-1m/ratings.dat", meta["key"][0], loc)
    for i, line in enumerate(lines):
        if (rand.random() < test_ratio) == is_test:
            uid, mov_id, rating, _ = _fields(line, 4, "ml-1m/ratings.dat", i, loc)
            usr, mov = meta["users"].get(int(uid)), meta["movies"].get(int(mov_id))
            if usr is None or mov is None:
                raise error(f"paddle.dataset.movielens: ml-1m/ratings.dat line {i + 1} rates "
                            f"{'user' if usr is None else 'movie'} {uid if usr is None else mov_id}, which "
                            f"{'users' if usr is None else 'movies'}.dat does not have", loc)
            yield usr.value() + mov.value() + [[float(rating) * 2 - 5.0]]


def _reader_creator(rand_seed=0, test_ratio=0.1, is_test=False):
    loc = user_loc()
    _meta(loc)
    return lambda: _reader(rand_seed, test_ratio, is_test, loc)


train = functools.partial(_reader_creator, is_test=False)
test = functools.partial(_reader_creator, is_test=True)
test.__test__ = False


def get_movie_title_dict() -> dict:
    """{title word (lower-case): id}."""
    return _meta()["titles"]


def movie_categories() -> dict:
    """{genre: id}."""
    return _meta()["categories"]


def max_movie_id() -> int:
    return max(m.index for m in _meta()["movies"].values())


def max_user_id() -> int:
    return max(u.index for u in _meta()["users"].values())


def max_job_id() -> int:
    return max(u.job_id for u in _meta()["users"].values())


def user_info() -> dict:
    """{user id: UserInfo}."""
    return _meta()["users"]


def movie_info() -> dict:
    """{movie id: MovieInfo}."""
    return _meta()["movies"]


__all__ = ["train", "test", "get_movie_title_dict", "max_movie_id", "max_user_id", "age_table", "movie_categories",
           "max_job_id", "user_info", "movie_info", "MovieInfo", "UserInfo", "URL"]
__getattr__ = missing_names(__name__, __all__)
